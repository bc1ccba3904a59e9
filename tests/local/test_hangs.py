"""A node frozen (SIGSTOP) at any point of an epoch is found and the job recovers: before its
rendezvous, while it loads a checkpoint, during the epoch's first step, and mid-training.

Faults are aimed by progress, not by the clock (`--hang-node-at rendezvous|loading|first-step|
step:N`): the worker that enters the phase stops itself there, so each test hits its phase on a
fast machine and on a loaded one alike. Before the first step, a frozen node is an agent that
stops renewing its report (silence timeout: hangTimeoutSeconds here); mid-training, it is a step
that does not advance. Time limits are deadlines with margins, not measurements.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.local import event_reasons, manifest, phalanx

TIMEOUT = 5
STEPS = 150
DETECTION_MARGIN = 10.0
"""Seconds a detection may come after its timeout on a busy machine (the planner looks at its
deadline; a loaded machine delays its tick and the agents' last renewals)."""


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _run(tmp_path: Path, *faults: str) -> dict[str, Any]:
    job = manifest(
        tmp_path, trainer={"steps": STEPS}, failurePolicy={"hangTimeoutSeconds": TIMEOUT}
    )
    run = phalanx("run", str(job), "--workdir", str(tmp_path), "-o", "json", *faults)
    assert run.code == 0, run.stderr[-4000:]
    summary = run.summary
    assert summary["phase"] == "Succeeded"
    assert summary["progress"]["step"] == STEPS
    return summary


def _found(summary: dict[str, Any], fault: dict[str, Any]) -> dict[str, Any]:
    """The Hang failure that names the frozen pod, found in time after the fault struck."""
    hangs = [f for f in summary["failures"] if f["reason"] == "Hang"]
    assert hangs, summary["failures"]
    hang: dict[str, Any] = hangs[0]
    assert hang["class"] == "infrastructure"
    detected = (_time(hang["time"]) - _time(fault["time"])).total_seconds()
    assert TIMEOUT - 1 <= detected <= TIMEOUT + DETECTION_MARGIN, f"found after {detected:.1f} s"
    return hang


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase", ["rendezvous", "first-step"])
def test_a_node_frozen_in_a_start_up_phase_is_found_and_replaced(
    tmp_path: Path, phase: str
) -> None:
    summary = _run(tmp_path, "--hang-node-at", phase)
    [fault] = summary["faults"]
    assert (fault["kind"], fault["phase"], fault["epoch"]) == ("hang-node", phase, 1)
    hang = _found(summary, fault)
    assert hang["pod"] == fault["pod"], "the silent agent's pod is named"
    assert "silent" in hang["message"]
    reasons = event_reasons(summary)
    assert reasons.count("Restart") == 1, reasons
    assert summary["resumes"][0]["epoch"] == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_node_frozen_while_loading_a_checkpoint_is_found_and_the_job_resumes(
    tmp_path: Path,
) -> None:
    summary = _run(tmp_path, "--kill-rank", "0@step:30", "--hang-node-at", "loading")
    killed, frozen = summary["faults"]
    assert killed["kind"] == "kill-rank"
    assert (frozen["kind"], frozen["phase"], frozen["epoch"]) == ("hang-node", "loading", 2)
    hang = _found(summary, frozen)
    assert hang["pod"] == frozen["pod"]
    last = summary["resumes"][-1]
    assert last["fromStep"] >= 20, f"the last recovery resumed from {last}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_node_frozen_mid_training_is_a_hang_of_the_step(tmp_path: Path) -> None:
    summary = _run(tmp_path, "--hang-node-at", "step:40")
    [fault] = summary["faults"]
    assert fault["kind"] == "hang-node"
    hang = _found(summary, fault)
    assert "no progress" in hang["message"]
    # The restart first offers the new epoch to every pod in place; the stopped node's agent
    # cannot take it, so once its 3 s to answer have passed its machine is presumed gone: the
    # next restart runs at the 3 nodes that answer (and the job may grow back to 4 after).
    frozen = [f for f in summary["failures"] if f["reason"] == "AgentUnresponsive"]
    assert [f["pod"] for f in frozen] == [fault["pod"]]
    restarts = [e["message"] for e in summary["events"] if e["reason"] == "Restart"]
    assert len(restarts) == 2, restarts
    assert restarts[1].endswith("epoch 3 with 3 nodes"), restarts
    assert summary["resumes"][-1]["fromStep"] >= 30
