"""A sharded job never shrinks below the smallest size that fits in GPU memory (spec.memory).

The quickstart with FSDP (full shard) and 1M of "GPU memory" (900 kB usable): the reference
model's states, 1.2 MB in fp32 with Adam, shard to 300 kB a rank at 4 nodes and 400 kB at 3, and
with 557 kB of activations only 4 nodes fit (`phalanx plan` prints the same table). A node lost
at step 60 would shrink the job to 3 nodes; instead it restarts at 4, waits for a fourth machine,
and, when none comes, ends saying why, rather than running out of memory at 3.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.local import event_reasons, manifest, phalanx


@pytest.mark.slow
def test_a_lost_node_does_not_shrink_the_job_below_what_fits_in_memory(tmp_path: Path) -> None:
    job = manifest(tmp_path, trainer={"sharding": "fsdp"}, memory={"gpuMemory": "1M"})
    plan = phalanx("plan", str(job), "-o", "json")
    assert plan.code == 0, plan.stderr
    [planned] = json.loads(plan.stdout)
    assert planned["smallestFitting"] == 4

    run = phalanx("run", str(job), "--workdir", str(tmp_path / "run"), "-o", "json",
                  "--kill-node-at", "step:60")  # fmt: skip
    assert run.code == 1, run.stderr[-4000:]
    summary = run.summary
    assert summary["message"] == (
        "only 3 of 4 node pods could be scheduled; 4 is the fewest that fit in GPU memory "
        "(min is 2)"
    )
    assert (summary["epoch"], summary["nodes"]) == (2, 4), "restarted at 4, not shrunk to 3"
    reasons = event_reasons(summary)
    assert "Shrink" not in reasons, reasons
    assert summary["progress"]["step"] >= 60, "it trained until the node was lost"
