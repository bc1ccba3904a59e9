"""A periodic save is reported as blocking training (the heartbeat's `saving`, then `savedAt`,
which the planner's hang timeout reads) when it blocks: a sync save, or an async one that first
waits for the last upload. An async save that only starts its upload is not: it returns at once,
and the reports cost the step. One rank in a real (single-member) gloo process group; a real
reporter and real saves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from phalanx.progress import Reporter
from phalanx.resume.run import Resumable
from phalanx.resume.settings import CheckpointSettings


@pytest.fixture(autouse=True)
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


def resumable(tmp_path: Path, *, async_save: bool) -> Resumable:
    model = nn.Linear(4, 2)
    settings = CheckpointSettings(
        location=str(tmp_path / "checkpoints"), interval_steps=2, async_save=async_save
    )
    return Resumable(
        model, torch.optim.SGD(model.parameters(), lr=0.1), dataset_size=8, global_batch=2,
        settings=settings, reporter=Reporter(tmp_path / "heartbeat.json", epoch=1),
    )  # fmt: skip


def train_step(run: Resumable) -> None:
    model = run.state.model
    model(torch.randn(2, 4)).sum().backward()
    run.state.optimizer.step()
    run.state.optimizer.zero_grad()
    run.step_done(0.0)


def test_an_async_save_with_no_upload_to_wait_for_is_not_reported(tmp_path: Path) -> None:
    run = resumable(tmp_path, async_save=True)
    train_step(run)
    train_step(run)  # step 2: saved in the background
    assert run.reporter.saved_at is None, "no blocking save reported"
    run.checkpoints.wait()
    assert run.checkpoints.valid_steps() == [2]
    run.close()


def test_a_save_that_blocks_is_reported(tmp_path: Path) -> None:
    run = resumable(tmp_path, async_save=False)
    train_step(run)
    train_step(run)
    assert run.reporter.saved_at is not None, "the sync save was reported while it ran"
    assert run.checkpoints.valid_steps() == [2]
    run.close()
