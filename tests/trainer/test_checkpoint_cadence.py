"""`spec.checkpoint.intervalSeconds` reaches the reference trainer and saves between the step
cadence's checkpoints (real agent, two gloo ranks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gang import start_node


@pytest.mark.timeout(300)
def test_interval_seconds_saves_between_the_step_cadence(tmp_path: Path) -> None:
    trainer = {
        "steps": 40,
        "checkpoint_interval_steps": 1000,  # never, by steps: only the final save at step 40
        "checkpoint_interval_seconds": 1,
        "checkpoint_keep": 100,
        "step_delay_seconds": 0.1,
    }
    node = start_node(tmp_path, 2, epoch=1, trainer=trainer)
    assert node.wait(timeout=240) == 0, node.log.read_text()[-3000:]
    saved = sorted(
        int(path.name.removeprefix("step-")) for path in (tmp_path / "checkpoints").glob("step-*")
    )
    assert saved[-1] == 40
    assert len(saved) >= 3, f"about one save a second over 4+ s of training: {saved}"
