"""A node whose CPU is throttled is found as a straggler and the job moves off it.

The throttle is real: from step 30 the node's processes (agent, worker, its collective threads)
run a quarter of the time (`--slow-node-at`, SIGSTOP/SIGCONT cycles as a CPU quota would
impose), so its work in a step (its forward passes and the trainer's emulated compute,
`--step-delay-seconds`, which advances only while the process runs) takes about 4 times as long.
In synchronous training every rank then takes as long per step as the slow one, so step times
cannot tell it; each rank's compute time (its median over 20 steps) does. The node stays
slow, so a job that stayed on it, or came back, would be found again: one Straggler and a clean
finish show that the job left it. The healthy counterpart is the quickstart's run, which must
raise none (tests/local/test_quickstart.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.local import event_reasons, manifest, phalanx

STEPS = 150


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_throttled_node_is_found_as_a_straggler_and_the_job_moves_off_it(
    tmp_path: Path,
) -> None:
    job = manifest(tmp_path, trainer={"steps": STEPS})
    run = phalanx(
        "run", str(job), "--workdir", str(tmp_path), "-o", "json", "--slow-node-at", "step:30"
    )
    assert run.code == 0, run.stderr[-4000:]
    summary = run.summary
    assert summary["phase"] == "Succeeded"
    assert summary["progress"]["step"] == STEPS

    [fault] = summary["faults"]
    assert fault["kind"] == "slow-node"
    [straggler] = [f for f in summary["failures"] if f["reason"] == "Straggler"]
    assert straggler["pod"] == fault["pod"], "the throttled node's pod, not a healthy one"
    [event] = [e["message"] for e in summary["events"] if e["reason"] == "Straggler"]
    slow_rank = int(re.search(r"\[(\d+)\]", event)[1])  # type: ignore[index]
    assert slow_rank == int(fault["pod"].rsplit("-", 1)[1]), event  # 1 process per node
    assert f"avoiding nodes ['{fault['node']}']" in event
    reasons = event_reasons(summary)
    assert reasons.count("Straggler") == 1, "the job left the slow node and did not return"
    assert reasons.index("FaultInjected") < reasons.index("Straggler")
    assert reasons[-1] == "Succeeded"
