"""A periodic save that fails (a full volume) does not stop training: `Resumable.step_done`
reports it in the heartbeat (the job's CheckpointFailing condition) and goes on, the last
committed checkpoint stays the newest valid one, and a later save that fits commits and clears
the report. Real DCP saves on a real 3 MiB tmpfs (mounting needs root, as CI has)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from phalanx.models.heartbeat import Heartbeat
from phalanx.progress import Reporter
from phalanx.resume.checkpoint import CheckpointSaveError
from phalanx.resume.run import Resumable
from phalanx.resume.settings import CheckpointSettings
from tests.support.disks import small_tmpfs


@pytest.fixture(autouse=True)
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "disk", "3m") as mount:
        yield mount


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_a_full_volume_is_reported_and_training_goes_on(
    small_disk: Path, tmp_path: Path, async_save: bool
) -> None:
    model = nn.Linear(256, 256)  # with AdamW's state about 0.8 MiB a checkpoint: 3 fit in 3 MiB
    optimizer = torch.optim.AdamW(model.parameters())
    settings = CheckpointSettings(location=str(small_disk), interval_steps=1, keep=10,
                                  async_save=async_save, memory_dir=None)  # fmt: skip
    reporter = Reporter(tmp_path / "progress.json", epoch=1)
    run = Resumable(model, optimizer, dataset_size=64, global_batch=8, settings=settings,
                    reporter=reporter)  # fmt: skip
    for _ in range(6):  # the fourth and later saves cannot fit: each is reported, none raises
        optimizer.zero_grad()
        model(torch.randn(8, 256)).sum().backward()
        optimizer.step()
        run.step_done(loss=1.0)
    with contextlib.suppress(CheckpointSaveError):
        run.checkpoints.wait()  # the save in flight (the disk is full) ends before the checks
    assert run.step == 6, "training went on"
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert beat.checkpoint_error is not None
    # sync: "No space left on device"; async: torch.save's "unexpected pos" on a short write
    assert f"step {beat.checkpoint_error.step}" in beat.checkpoint_error.message
    assert beat.checkpoint_error.step is not None
    assert beat.checkpoint_error.step >= 4
    valid = run.checkpoints.valid_steps()
    assert valid, "the committed checkpoints stay"
    assert max(valid) <= 3
    assert beat.checkpoint is not None
    assert beat.checkpoint.step == max(valid)

    for step in valid[:-1]:  # room again (a user cleaned up): the next save commits
        subprocess.run(["rm", "-rf", str(small_disk / f"step-{step}")], check=True)
    for leftover in small_disk.iterdir():
        if leftover.name != f"step-{max(valid)}":
            subprocess.run(["rm", "-rf", str(leftover)], check=True)
    optimizer.step()
    run.step_done(loss=1.0)
    run.close()
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert beat.checkpoint_error is None, "a committed save clears the report"
    assert beat.checkpoint is not None
    assert beat.checkpoint.step == 7
