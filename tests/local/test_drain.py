"""A node drained for maintenance on the local backend, with real agents and torch workers.

Covers: the node running rank 3 is cordoned at step 60 (`--drain-node-at`); the job stops that
rank's pod gracefully, every rank saves the step it reached, the hot spare takes rank 3 and the
gang trains on from that very step: no step redone, no failure recorded, no restart counted, a
planned resize (one Drain event, no Restart). The loss trajectory matches an uninterrupted run
within 1e-4 and every sample is used exactly once per data epoch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gang import check_same_trajectory, records
from tests.support.local import event_reasons, manifest, phalanx

STEPS = 160
GLOBAL_BATCH = 16  # the quickstart's
DATASET = 240  # the trainer's default


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_drained_node_hands_its_rank_to_the_spare_with_no_step_redone(tmp_path: Path) -> None:
    job = manifest(tmp_path, spares=1, trainer={"steps": STEPS})
    reference = phalanx("run", str(job), "--workdir", str(tmp_path / "reference"), "-o", "json")
    assert reference.code == 0, reference.stderr[-4000:]

    workdir = tmp_path / "drained"
    run = phalanx("run", str(job), "--workdir", str(workdir), "-o", "json",
                  "--drain-node-at", "step:60")  # fmt: skip
    assert run.code == 0, run.stderr[-4000:]
    summary = run.summary
    assert summary["phase"] == "Succeeded"
    assert (summary["nodes"], summary["epoch"]) == (4, 2)
    assert summary["restarts"]["total"] == 0, "a planned move spends no restart budget"
    assert summary["failures"] == []
    reasons = event_reasons(summary)
    assert reasons.count("Drain") == 1, reasons  # one planned resize
    assert "Restart" not in reasons, reasons
    assert "Shrink" not in reasons, reasons

    [drain] = summary["faults"]
    assert drain["kind"] == "drain-node"
    assignment = json.loads((workdir / "assignment.json").read_text())
    assert "quickstart-1-s0" in assignment["ranks"], "the spare took the drained node's rank"
    assert drain["pod"] not in assignment["ranks"]

    first, moved = [r for r in records(workdir) if r.get("event") == "resume"]
    trained = max(int(r["step"]) for r in records(workdir) if "loss" in r and r["epoch"] == 1)
    assert first["from"] is None
    assert moved["from"] == trained, (
        f"epoch 1 trained to step {trained} and saved it on SIGTERM; epoch 2 resumed from "
        f"{moved['from']}"
    )

    check_same_trajectory(tmp_path / "reference", workdir, STEPS, DATASET, GLOBAL_BATCH)
