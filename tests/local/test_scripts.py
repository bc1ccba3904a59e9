"""Third-party training scripts under `phalanx run`, real processes, each losing a node:

- `torchrun train.py` as the container's command (torchrun-script.yaml): the PET_* contract;
- `python train.py` as the command with one process per pod (python-script.yaml): the
  PyTorchJob contract, RANK and WORLD_SIZE on the pod;
- a script that uses `phalanx.progress` under the agent (progress-script.yaml).

The first two report nothing, so the run says so: no step, no goodput, no lost time, and each
recovery measured only to the new epoch's pods running, labelled so. What they did is read from
their own step log instead. The third shows its steps, loss and newest checkpoint, recovers to
its first step, and a node frozen in it is found as a step that does not advance.

The shipped examples run as shipped, but for the script's path (this repository's), a shorter
run, a fixed size of 2 nodes and one spare machine, so that the lost node is replaced. Time
limits are deadlines with margins, not measurements.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.local import ROOT, event_reasons, phalanx

EXAMPLES = ROOT / "deploy" / "examples"
STEPS = 40
SECONDS_PER_STEP = "0.05"


def example(tmp_path: Path, name: str, **spec: Any) -> Path:
    """deploy/examples/<name>.yaml with the script from this repository, STEPS steps, 2 nodes."""
    job = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    container = job["spec"]["template"]["spec"]["containers"][0]
    key = "command" if "command" in container else "args"
    argv = [arg.replace("/script/", f"{EXAMPLES}/") for arg in container[key]]
    container[key] = [*argv[:-2], str(STEPS), SECONDS_PER_STEP]
    job["spec"]["replicas"] = {"min": 2, "max": 2}
    job["spec"].update(spec)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def run(tmp_path: Path, name: str, *faults: str, **spec: Any) -> dict[str, Any]:
    """Run the example to the end with `faults` on 3 machines; its JSON summary."""
    workdir = tmp_path / "run"
    done = phalanx("run", str(example(tmp_path, name, **spec)), "--workdir", str(workdir),
                   "--capacity", "3", "-o", "json", *faults, timeout=240)  # fmt: skip
    assert done.code == 0, done.stderr[-4000:]
    summary = done.summary
    assert summary["phase"] == "Succeeded", summary["message"]
    return summary


def step_log(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """What the script itself logged (rank 0): `resumed` and `step` records."""
    log = Path(summary["workdir"], "checkpoints", "steps.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def resumed_after_the_fault(summary: dict[str, Any]) -> dict[str, Any]:
    """The script's first resume after the node was killed: from a checkpoint, not the start."""
    [fault] = summary["faults"]
    assert fault["kind"] == "kill-node"
    struck = datetime.fromisoformat(fault["time"].replace("Z", "+00:00")).timestamp()
    log = step_log(summary)
    resumed = [r for r in log if "resumed" in r and r["time"] > struck]
    assert resumed, log[-5:]
    assert resumed[0]["resumed"] >= 10, "the restart resumed from a checkpoint"
    assert max(r.get("step", 0) for r in log) == STEPS
    return resumed[0]


def condition(summary: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in summary["conditions"] if c["type"] == kind)
    return found


def assert_reports_no_figures_it_did_not_measure(summary: dict[str, Any]) -> None:
    """A program that reports no steps: nothing the run could not see is given as a number."""
    assert summary.get("progress") is None, "no step reported, none made up"
    assert summary.get("goodput") is None
    assert summary.get("lostSeconds") is None
    reported = condition(summary, "ProgressReported")
    assert (reported["status"], reported["reason"]) == ("False", "NoStepsReported")
    assert summary["restarts"]["total"] >= 1
    assert len(summary["recoveries"]) == summary["restarts"]["total"]
    for seconds, resume, parts in zip(
        summary["recoveries"], summary["resumes"], summary["recoveryParts"], strict=True
    ):
        assert resume["until"] == "pods-running", resume
        assert (resume.get("fromStep"), resume.get("stepsRedone")) == (None, None)
        assert parts == {}, "no start-up stages were reported to split it into"
        assert 0 < seconds < summary["durationSeconds"]
    recovered = [e["message"] for e in summary["events"] if e["reason"] == "Recovered"]
    assert recovered
    assert all("its pods ran" in m and "reports no steps" in m for m in recovered), recovered
    checkpoint = summary["lastCheckpoint"]  # found complete in the run's directory
    assert checkpoint["step"] == STEPS
    assert Path(checkpoint["path"], ".metadata").exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_torchrun_as_the_command_finishes_after_losing_a_node(tmp_path: Path) -> None:
    summary = run(tmp_path, "torchrun-script", "--kill-node-at", "checkpoint")
    resumed = resumed_after_the_fault(summary)
    assert resumed["world"] == 4, "2 nodes x 2 processes, from the PET_* variables"
    assert_reports_no_figures_it_did_not_measure(summary)
    assert summary["failures"][0]["reason"] == "NodeNotReady"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_python_script_as_the_command_gets_the_pytorchjob_ranks(tmp_path: Path) -> None:
    summary = run(
        tmp_path, "python-script", "--kill-node-at", "checkpoint",
        "--capacity-schedule", "step:1000=3",  # the same 3 nodes, were it ever due
    )  # fmt: skip
    resumed = resumed_after_the_fault(summary)
    assert resumed["world"] == 2, "RANK and WORLD_SIZE came from the pod: 2 pods, 1 process"
    assert summary["worldSize"] == 2
    assert_reports_no_figures_it_did_not_measure(summary)
    [warning] = [e["message"] for e in summary["events"] if e["reason"] == "NoSteps"]
    assert "capacity 3 at step:1000" in warning, "what waits for a step that never comes is said"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_script_using_phalanx_progress_shows_its_progress_through_a_lost_node(
    tmp_path: Path,
) -> None:
    summary = run(tmp_path, "progress-script", "--kill-node-at", "step:15")
    resumed_after_the_fault(summary)
    progress = summary["progress"]
    assert progress["step"] == STEPS
    assert progress["loss"] is not None
    assert progress["samplesPerSecond"] > 0
    checkpoint = summary["lastCheckpoint"]
    assert checkpoint["step"] == STEPS
    assert checkpoint["path"] == str(Path(summary["workdir"], "checkpoints", f"step-{STEPS}"))
    assert "time" in checkpoint, "reported by the script (progress.checkpoint), not found"
    assert condition(summary, "ProgressReported")["status"] == "True"
    [resume] = summary["resumes"]
    assert resume["until"] == "first-step"
    assert resume["resumeReported"] is False, "the script does not say what it resumed from"
    assert "fromStep" not in resume
    [recovery] = summary["recoveries"]
    assert 0 < recovery < 60
    assert 0 < summary["goodput"] < 1
    assert summary["lostSeconds"] >= recovery
    reasons = event_reasons(summary)
    assert reasons.count("Restart") == 1, reasons
    assert "StartupTimeout" not in reasons


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_node_frozen_in_a_script_using_phalanx_progress_is_found_by_its_peers(
    tmp_path: Path,
) -> None:
    """The step stalls too (hangTimeoutSeconds 5, held to 8 s where the agents watch each
    other), but the peers' agents name the frozen pod first: one restart without it."""
    summary = run(
        tmp_path, "progress-script", "--hang-node-at", "step:15",
        failurePolicy={"hangTimeoutSeconds": 5},
    )  # fmt: skip
    [fault] = summary["faults"]
    assert fault["kind"] == "hang-node"
    failures = [
        (f["reason"], f["pod"]) for f in summary["failures"] if f["epoch"] == fault["epoch"]
    ]
    assert failures == [("PeerSilent", fault["pod"])], summary["failures"]
    struck = datetime.fromisoformat(fault["time"].replace("Z", "+00:00"))
    found = datetime.fromisoformat(summary["failures"][0]["time"].replace("Z", "+00:00"))
    assert 3 <= (found - struck).total_seconds() <= 4 + 10, "4 s unheard, with a margin"
    assert summary["progress"]["step"] == STEPS
