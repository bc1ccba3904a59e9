"""`Resumable` keeps memory snapshots within spec.checkpoint.memoryOverheadPercent: here a
snapshot costs far more than 1 % of a step (the steps do nothing), so with the default budget
the job snapshots less often once a snapshot was measured (the first: its two slots were made
within the first optimizer step), and with a budget of 0 exactly every memoryIntervalSteps. A
checkpoint's step always has a snapshot, which the checkpoint stages from. One rank in a real
gloo group, real tensors, real DCP; the per-step agreement across ranks runs in
tests/local/test_inplace.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from phalanx.resume import Resumable
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.settings import CheckpointSettings


@pytest.fixture(autouse=True)
def one_rank() -> Iterator[None]:
    """A real single-member group, as a worker has (DCP's async save needs one)."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


def snapshot_steps(tmp_path: Path, overhead_percent: int, steps: int = 40,
                   checkpoint_every: int = 1000, background: bool = False) -> list[int]:  # fmt: skip
    """The steps a run snapshotted at, read from its slots after each step (`background`: the
    copy on the snapshot thread, as on a GPU)."""
    settings = CheckpointSettings(
        location=str(tmp_path / "checkpoints"), interval_steps=checkpoint_every,
        memory_dir=str(tmp_path), memory_interval_steps=2,
        memory_overhead_percent=overhead_percent,
    )  # fmt: skip
    model = nn.Linear(256, 256)
    optimizer = torch.optim.AdamW(model.parameters())
    run = Resumable(model, optimizer, dataset_size=64, global_batch=4, settings=settings)
    run.memory.background = background
    taken: list[int] = []
    for _ in range(steps):
        optimizer.step()  # no gradients: nothing changes, and the step takes no time
        run.step_done(report=False)
        run.memory.wait()
        newest = max((s for s in (slot.step() for slot in run.memory.own_slots()) if s), default=0)
        if newest == run.step:
            taken.append(run.step)
    run.close()
    return taken


def test_snapshots_that_cost_more_than_the_budget_are_taken_less_often(tmp_path: Path) -> None:
    taken = snapshot_steps(tmp_path, overhead_percent=1)
    assert taken[0] == 2, "the first at memoryIntervalSteps"
    assert 4 not in taken, "measured at once: its slots were made within the first step"
    assert len(taken) < 10, f"spaced to the budget, not every 2 steps: {taken}"
    assert all(step % 2 == 0 for step in taken), "spacings are multiples of the interval"


def test_a_budget_of_zero_snapshots_every_interval(tmp_path: Path) -> None:
    assert snapshot_steps(tmp_path, overhead_percent=0) == list(range(2, 41, 2))


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_a_checkpoint_step_has_a_snapshot_to_stage_from(tmp_path: Path, background: bool) -> None:
    """In the background (a GPU's way) this once deadlocked on an H200: the snapshot's copy
    waited for the checkpoint lent its slot, which waited for the copy."""
    taken = snapshot_steps(tmp_path, overhead_percent=1, checkpoint_every=5, background=background)
    assert {10, 15, 20, 25, 30, 35, 40} <= set(taken), taken
    assert CheckpointManager(str(tmp_path / "checkpoints")).valid_steps()[0] == 40
