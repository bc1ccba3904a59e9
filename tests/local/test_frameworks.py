"""Third-party frameworks under the agent, real processes (`phalanx run`): a PyTorch Lightning
DDP script and a Hugging Face `Trainer` script (deploy/examples/lightning_train.py, hf_train.py),
each with the one-line callback of `phalanx.integrations`, each losing a worker.

What the callbacks bring is asserted on the run's summary: the job's steps, loss, throughput and
newest checkpoint come from the frameworks' own hooks; the worker's kill restarts the gang in
place and the recovery is measured to the first step after it; goodput is known. The scripts'
own step logs show that they resumed from their frameworks' checkpoints, not from the start.

Both run 2 nodes x 1 process on this 2-core machine. Time limits are deadlines with margins.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.jobs import job_manifest
from tests.support.local import ROOT, event_reasons, phalanx

EXAMPLES = ROOT / "deploy" / "examples"
STEPS = 40


def job(tmp_path: Path, name: str, argv: list[str]) -> Path:
    manifest = job_manifest(
        name,
        replicas={"max": 2},
        checkpoint={"dir": f"/checkpoints/{name}"},
        container={"name": "train", "image": "user/own:1", "args": argv},
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


def run_with_a_worker_killed(tmp_path: Path, name: str, script: str, *extra: str) -> dict[str, Any]:
    argv = ["python", str(EXAMPLES / script), "$(PHALANX_CHECKPOINT_DIR)", str(STEPS), *extra,
            "--phalanx"]  # fmt: skip
    done = phalanx("run", str(job(tmp_path, name, argv)), "--workdir", str(tmp_path / "run"),
                   "-o", "json", "--kill-rank", "1@step:15", timeout=420)  # fmt: skip
    assert done.code == 0, done.stderr[-4000:]
    summary = done.summary
    assert summary["phase"] == "Succeeded", summary["message"]
    return summary


def assert_reported_like_the_reference_trainer(summary: dict[str, Any]) -> None:
    progress = summary["progress"]
    assert progress["step"] == STEPS
    assert progress["totalSteps"] == STEPS, "the Trainer's max_steps, for the ETA"
    assert "eta" in progress
    assert progress["loss"] is not None
    assert progress["samplesPerSecond"] > 0
    assert 0 < summary["goodput"] < 1
    assert summary["lastCheckpoint"]["step"] >= 30, "the framework's checkpoint, as reported"
    assert Path(summary["lastCheckpoint"]["path"]).exists()
    assert summary["restarts"]["total"] == 1
    [resume] = summary["resumes"]
    assert resume["until"] == "first-step", "recovery measured to the first step after it"
    [recovery] = summary["recoveries"]
    assert 0 < recovery < 120
    reasons = event_reasons(summary)
    assert reasons.count("Restart") == 1, reasons
    assert [f["reason"] for f in summary["failures"]] == ["Killed"], summary["failures"]


def resumed_from_a_checkpoint(summary: dict[str, Any]) -> None:
    log = Path(summary["workdir"], "checkpoints", "steps.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    resumes = [r["resumed"] for r in records if "resumed" in r]
    assert resumes[0] == 0
    assert len(resumes) == 2, resumes
    assert resumes[1] >= 10, "resumed from the framework's checkpoint"


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    ("name", "script"), [("lightning", "lightning_train.py"), ("hf", "hf_train.py")]
)
def test_a_framework_script_with_the_callback_reports_and_restarts_in_place(
    tmp_path: Path, name: str, script: str
) -> None:
    summary = run_with_a_worker_killed(tmp_path, name, script, "0.05")
    assert_reported_like_the_reference_trainer(summary)
    resumed_from_a_checkpoint(summary)
