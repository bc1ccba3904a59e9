"""A long blocking save is no hang: the reference trainer's final save blocks 45 s (emulated
slow storage, `--final-save-delay-seconds`), longer than the adaptive hang timeout at its floor
(30 s), with the failure policy's hang timeout at its default. The trainer reports the save in
progress (`phalanx.progress.saving`, which the resume library's saves use), the planner allows a
save 2 minutes at least, and the job succeeds in its first epoch. Without the report the step's
stillness would be a Hang 30 s after the last step (the planner's own test:
tests/unit/planner/test_hangs.py). The counterpart, a real stall found by the default timeout,
is the kind suite's `rank-stalled-default`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from phalanx.operator.planner.heartbeat import HANG_FLOOR_SECONDS
from tests.support.local import event_reasons, manifest, phalanx

SAVE_SECONDS = 45.0
STEPS = 40


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_final_save_longer_than_the_hang_timeout_is_not_a_hang(tmp_path: Path) -> None:
    assert SAVE_SECONDS > HANG_FLOOR_SECONDS + 10, "the save must outlast the default timeout"
    args = ["python", "-m", "phalanx.trainer.train", "--step-delay-seconds", "0.1",
            "--final-save-delay-seconds", str(SAVE_SECONDS)]  # fmt: skip
    job = manifest(
        tmp_path, trainer={"steps": STEPS}, failurePolicy={"hangTimeoutSeconds": None},
        template={"spec": {"containers": [
            {"name": "trainer", "image": "phalanx/trainer:0.1.0", "args": args}]}},
    )  # fmt: skip
    run = phalanx("run", str(job), "--workdir", str(tmp_path), "-o", "json")
    assert run.code == 0, run.stderr[-4000:]
    summary = run.summary
    assert summary["phase"] == "Succeeded", summary.get("conditions")
    reasons = event_reasons(summary)
    assert "Hang" not in reasons, reasons
    assert (summary["epoch"], summary["failures"]) == (1, []), summary["failures"]
    last_step = datetime.fromisoformat(summary["progress"]["updatedAt"].replace("Z", "+00:00"))
    [succeeded] = [e for e in summary["events"] if e["reason"] == "Succeeded"]
    ended = datetime.fromisoformat(succeeded["time"].replace("Z", "+00:00"))
    # the last step's time is when the planner saw it, up to a poll after the step itself
    assert (ended - last_step).total_seconds() >= SAVE_SECONDS - 2, "the save did block"
