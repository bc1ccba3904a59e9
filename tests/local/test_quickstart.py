"""The README's first command: the quickstart on 4 local nodes, one node killed at step 60.

Covers: the same arguments as `make quickstart`; one restart, straight at 3 nodes, after the node
is lost (the survivors carry over in place; no wait for a replacement that cannot come);
the resume from a checkpoint (not from scratch) at world size 3; the finish; the summary's
failure, recovery time, goodput and last checkpoint in `--output json`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gang import records
from tests.support.local import event_reasons, phalanx, quickstart_args


@pytest.mark.slow
def test_quickstart_closes_ranks_after_a_node_is_killed(tmp_path: Path) -> None:
    args = quickstart_args()
    assert "--kill-node-at" in args
    assert "step:60" in args, "the fault follows training, not the clock"
    run = phalanx("run", *args, "--workdir", str(tmp_path), "--output", "json")
    assert run.code == 0, run.stderr[-4000:]
    summary = run.summary

    assert summary["phase"] == "Succeeded"
    assert summary["progress"]["step"] == 250
    assert summary["progress"]["totalSteps"] == 250, "the trainer's steps, for the ETA"
    assert "eta" in summary["progress"]
    assert (summary["nodes"], summary["worldSize"]) == (3, 3)
    assert summary["restarts"] == {"application": 0, "infrastructure": 1, "total": 1}
    [failure] = summary["failures"]
    assert (failure["class"], failure["reason"]) == ("infrastructure", "NodeNotReady")
    [fault] = summary["faults"]
    assert fault["kind"] == "kill-node"
    assert fault["pod"] == failure["pod"]
    reasons = event_reasons(summary)
    assert reasons.count("Restart") == 1, reasons
    assert "Shrink" not in reasons, reasons
    assert "Straggler" not in reasons, "a healthy run raises no straggler"
    assert reasons.index("FaultInjected") < reasons.index("Restart")
    [restart] = [e["message"] for e in summary["events"] if e["reason"] == "Restart"]
    assert "epoch 2 with 3 nodes" in restart
    assert reasons[-1] == "Succeeded"
    [recovery] = summary["recoveries"]
    assert 0 < recovery < 60
    assert 0 < summary["goodput"] < 1
    assert summary["lostSeconds"] >= recovery
    assert summary["lastCheckpoint"]["step"] == 250
    assert Path(summary["lastCheckpoint"]["path"], ".metadata").exists()

    resumes = [r for r in records(tmp_path) if r.get("event") == "resume"]
    assert resumes[0]["from"] is None  # the first epoch started fresh
    assert resumes[-1]["world"] == 3
    assert resumes[-1]["from"] is not None
    assert resumes[-1]["from"] > 0, "the shrunk gang did not resume from a checkpoint"
    [resume] = summary["resumes"]
    assert resume["fromStep"] == resumes[-1]["from"], "the summary says what the trainer loaded"
    assert resume["fromStep"] >= 60 - 10, "the fault came after step 60, snapshots every 10"
    assert resume["stepsRedone"] >= 0
    assert f"resumed from step {resume['fromStep']}" in run.stderr, "the text summary says it"
    assert len(run.stdout.strip().splitlines()) == 1
