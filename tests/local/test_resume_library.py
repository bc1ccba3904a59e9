"""A user's DDP script converted with `phalanx.resume` (deploy/examples/resumable_train.py, as
python-script.yaml ships it) through 4 -> 3 -> 4 nodes on a local cluster.

Covers: the library's resume at another world size (DCP resharded, from storage or from the pod
memory snapshots the agent gives it), the global sampler (every sample exactly once, the global
batch the same), the cadence taken from `spec.checkpoint.intervalSteps` and the checkpoints it
reports (the status shows the cadence the script really kept). The trajectory must match an
uninterrupted 4-node run within 1e-4 at every step.

The script runs under the agent here (`args`, the image's entrypoint), so its steps and
checkpoints reach the status; tests/local/test_scripts.py runs the same example as the
container's command, bare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.gang import check_exactly_once
from tests.support.local import ROOT, event_reasons, phalanx

EXAMPLES = ROOT / "deploy" / "examples"
STEPS = 400  # >= 40 s of steps (0.1 s each): still training when capacity returns at 30 s
DATASET, GLOBAL_BATCH = 240, 12  # the script's
INTERVAL = 10


def _job(tmp_path: Path) -> Path:
    """python-script.yaml for 3..4 nodes, run under the agent, with this repository's script."""
    job = yaml.safe_load((EXAMPLES / "python-script.yaml").read_text())
    container = job["spec"]["template"]["spec"]["containers"][0]
    argv = [arg.replace("/script/", f"{EXAMPLES}/") for arg in container.pop("command")]
    container["args"] = [*argv[:-2], str(STEPS), "0.1"]
    job["spec"]["replicas"] = {"min": 3, "max": 4}
    assert job["spec"]["checkpoint"]["intervalSteps"] == INTERVAL
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def _run(tmp_path: Path, name: str, *options: str) -> dict[str, Any]:
    done = phalanx("run", str(_job(tmp_path)), "--workdir", str(tmp_path / name), "-o", "json",
                   *options, timeout=500)  # fmt: skip
    assert done.code == 0, done.stderr[-4000:]
    summary = done.summary
    assert summary["phase"] == "Succeeded", summary["message"]
    return summary


def _kept(workdir: Path) -> tuple[dict[int, float], dict[int, tuple[int, list[int]]], set[int]]:
    """The script's own logs: losses of the steps that count (those redone after a resume are
    replaced), each step's global sample ids (the newest epoch's), and the world sizes seen."""
    root = workdir / "checkpoints"
    losses: dict[int, float] = {}
    worlds: set[int] = set()
    for record in map(json.loads, (root / "steps.jsonl").read_text().splitlines()):
        if "resumed" in record:
            losses = {s: v for s, v in losses.items() if s <= record["resumed"]}
        else:
            losses[record["step"]] = record["loss"]
            worlds.add(record["world"])
    by_step: dict[int, dict[int, list[dict[str, Any]]]] = {}
    for path in sorted(root.glob("samples-*.jsonl")):
        for record in map(json.loads, path.read_text().splitlines()):
            by_step.setdefault(record["step"], {}).setdefault(record["epoch"], []).append(record)
    samples = {}
    for step, runs in by_step.items():
        parts = sorted(runs[max(runs)], key=lambda r: r["dp_rank"])
        samples[step] = (parts[0]["position"], [i for part in parts for i in part["ids"]])
    return losses, samples, worlds


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_converted_script_keeps_its_trajectory_through_4_3_4_nodes(tmp_path: Path) -> None:
    reference = _run(tmp_path, "reference", "--capacity", "4")
    assert reference["restarts"]["total"] == 0
    elastic = _run(
        tmp_path, "elastic", "--capacity", "4", "--kill-node-at", "step:40",
        "--capacity-schedule", "30s=4",
    )  # fmt: skip
    reasons = event_reasons(elastic)
    assert reasons.index("Restart") < reasons.index("Grow"), reasons
    assert elastic["worldSize"] == 4

    expected, _, reference_worlds = _kept(tmp_path / "reference")
    resized, samples, worlds = _kept(tmp_path / "elastic")
    assert reference_worlds == {4}
    assert worlds == {3, 4}, f"trained at world sizes {worlds}"
    assert sorted(expected) == sorted(resized) == list(range(1, STEPS + 1))
    worst = max(abs(expected[s] - resized[s]) for s in expected)
    assert worst <= 1e-4, f"largest loss difference {worst:.2e}"
    check_exactly_once(samples, DATASET, GLOBAL_BATCH, STEPS)

    for summary in (reference, elastic):  # what the script reported, not what the spec asked
        assert summary["progress"]["step"] == STEPS
        assert summary["lastCheckpoint"]["step"] == STEPS
        assert summary["checkpointIntervalSteps"] == INTERVAL
    [resume] = elastic["resumes"]  # the lost node's recovery (growing back is planned)
    assert resume["until"] == "first-step", resume
    assert resume["resumeReported"] is True, "the library says what it resumed from"
    assert resume["fromStep"] >= INTERVAL, resume
