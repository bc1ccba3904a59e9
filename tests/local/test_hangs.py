"""A node frozen (SIGSTOP of its agent and workers) at any point of an epoch is found and the job
recovers: before its rendezvous, while it loads a checkpoint, during the epoch's first step, and
mid-training.

Faults are aimed by progress, not by the clock (`--hang-node-at rendezvous|loading|first-step|
step:N`): the worker that enters the phase stops itself there, so each test hits its phase on a
fast machine and on a loaded one alike. A frozen node is a machine whose agent no longer pings
its peers' agents: node rank 0's agent (or, for node rank 0, node ranks 1 and 2) names it
(PeerSilent) about 4 s after it stopped, in any phase, and the job restarts once without it.
The other rules a frozen node would trip (its report's renewals stop, the step stalls) are held
to 8 s (10 s from the last renewal) where the peers watch, so that their word comes first. Time limits are deadlines with
margins, not measurements.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.local import event_reasons, manifest, phalanx

TIMEOUT = 5
"""hangTimeoutSeconds: shorter than the peers' 8 s, so held to that where they watch."""
SILENT = 4.0
"""Seconds unheard before a peer is silent (`phalanx.agent.peers.SILENT_SECONDS`)."""
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
    """The PeerSilent failure that names the frozen pod, found in time after the fault struck,
    and the only failure of the fault's epoch (one restart, not one per rule that fires)."""
    failures = [f for f in summary["failures"] if f["epoch"] == fault["epoch"]]
    found = [(f["reason"], f["pod"]) for f in failures]
    assert found == [("PeerSilent", fault["pod"])], json.dumps([fault, *failures], indent=1)
    silent: dict[str, Any] = failures[0]
    assert silent["class"] == "infrastructure"
    detected = (_time(silent["time"]) - _time(fault["time"])).total_seconds()
    assert SILENT - 1 <= detected <= SILENT + DETECTION_MARGIN, f"found after {detected:.1f} s"
    return silent


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase", ["rendezvous", "first-step"])
def test_a_node_frozen_in_a_start_up_phase_is_found_and_replaced(
    tmp_path: Path, phase: str
) -> None:
    summary = _run(tmp_path, "--hang-node-at", phase)
    [fault] = summary["faults"]
    assert (fault["kind"], fault["phase"], fault["epoch"]) == ("hang-node", phase, 1)
    silent = _found(summary, fault)
    assert "not heard node rank" in silent["message"]
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
    _found(summary, frozen)
    last = summary["resumes"][-1]
    assert last["fromStep"] >= 20, f"the last recovery resumed from {last}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_node_frozen_mid_training_is_one_restart_without_it(tmp_path: Path) -> None:
    """Its peers' collectives wait and the step stalls (a hang after 5 s, held to 8 s), but
    the peers' agents name the frozen pod first, and the restart leaves it out: one restart,
    at the 3 nodes that answer (the job may grow back to 4 after)."""
    summary = _run(tmp_path, "--hang-node-at", "step:40")
    [fault] = summary["faults"]
    assert fault["kind"] == "hang-node"
    _found(summary, fault)
    restarts = [e["message"] for e in summary["events"] if e["reason"] == "Restart"]
    assert len(restarts) == 1, restarts
    assert restarts[0].endswith(f"epoch {fault['epoch'] + 1} with 3 nodes"), restarts
    assert summary["resumes"][-1]["fromStep"] >= 30
