"""A checkpoint at a memory snapshot's step is staged from the snapshot's slot (one copy of the
state, not two), and the slot is not written again until the checkpoint's upload is done.

One rank in a real (single-member) gloo group, real DCP saves and loads. How the values are told
apart: the live state is changed between the snapshot and the checkpoint's save, which never
happens in training (they run back to back in `Resumable.step_done`); a checkpoint staged from
the snapshot holds the snapshot's values, one staged by DCP the live ones. Every strategy's
checkpoints go through this path in tests/trainer/test_trajectory.py, whose resumed losses must
match an uninterrupted run's.

Each test runs with the copy made in `maybe_save` (the CPU's way) and on the snapshot thread (a
GPU's way, `background`), where a checkpoint lends the snapshot while its copy may still be
queued: on an H200 that path once deadlocked (the copy waited for its own checkpoint).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from phalanx.resume import devices
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.memory import MemorySnapshots


@pytest.fixture(params=[False, True], ids=["inline", "background"])
def background(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(autouse=True)
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


class Weights:
    """A stateful with two tensors and a counter, like the trainer's AppState."""

    def __init__(self, value: float = 0.0) -> None:
        self.weights = torch.full((256,), value)
        self.scale = torch.tensor([value])
        self.step = 0

    def state_dict(self) -> dict[str, Any]:
        return {"w": self.weights, "s": self.scale, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights.copy_(state["w"])
        self.scale.copy_(state["s"])
        self.step = state["step"]

    def set(self, value: float, step: int) -> None:
        self.weights.fill_(value)
        self.scale.fill_(value)
        self.step = step


def stored(manager: CheckpointManager) -> tuple[int | None, float, float]:
    target = Weights(-1.0)
    step = manager.load_latest({"app": target})
    return step, float(target.weights[0]), float(target.scale[0])


def test_a_checkpoint_at_a_snapshot_step_holds_the_snapshots_copy(
    tmp_path: Path, background: bool
) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=2, local_rank=0, background=background)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    live.set(2.0, 2)
    assert memory.maybe_save(2, live)
    memory.wait_staged()  # as the next optimizer step does before it changes the state
    live.weights.fill_(99.0)  # after the snapshot's copy: not in it
    manager.save(2, {"app": live}, snapshot=memory.lend(2))
    manager.wait()
    assert stored(manager) == (2, 2.0, 2.0), "staged from the slot, not from the live state"


def test_a_checkpoint_lent_the_snapshot_before_its_copy_ran_completes(
    tmp_path: Path, background: bool
) -> None:
    """The training loop's order: the snapshot, at once the checkpoint lent it (its copy may
    still be queued on the snapshot thread), then the next optimizer step's wait."""
    memory = MemorySnapshots(tmp_path, interval_steps=2, local_rank=0, background=background)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    for step in (2, 4):  # the first snapshot starts the snapshot thread; the second finds it idle
        live.set(float(step), step)
        memory.maybe_save(step, live)
        lent = memory.lend(step)
        manager.save(step, {"app": live}, snapshot=lent)
        done = threading.Thread(target=_next_step_then_upload, args=(memory, manager))
        done.start()
        done.join(timeout=60)
        if done.is_alive() and lent is not None:
            lent.returned.set()  # let the stuck copy go, or this process never exits
        assert not done.is_alive(), "the copy waited for the checkpoint that waits for it"
        assert stored(manager) == (step, float(step), float(step))


def _next_step_then_upload(memory: MemorySnapshots, manager: CheckpointManager) -> None:
    memory.wait_staged()
    manager.wait()


def test_without_a_snapshot_of_its_step_a_checkpoint_copies_the_live_state(
    tmp_path: Path, background: bool
) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=2, local_rank=0, background=background)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    live.set(2.0, 2)
    memory.maybe_save(2, live)
    live.set(3.0, 3)
    assert memory.lend(3) is None, "no snapshot of step 3"
    manager.save(3, {"app": live}, snapshot=memory.lend(3))
    manager.wait()
    assert stored(manager) == (3, 3.0, 3.0)


def test_a_state_unlike_the_snapshot_is_staged_by_dcp_and_the_slot_given_back(
    tmp_path: Path, background: bool
) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0, background=background)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    live.set(1.0, 1)
    memory.maybe_save(1, live)
    other = {"app": {"w": torch.full((8,), 5.0), "s": torch.tensor([5.0]), "step": 1}}
    lent = memory.lend(1)
    assert lent is not None
    manager.save(1, other, snapshot=lent)  # its tensors are not the snapshot's
    manager.wait()
    assert lent.returned.is_set(), "the slot is free for the snapshot after next"
    target = {"app": {"w": torch.zeros(8), "s": torch.zeros(1), "step": 0}}
    assert manager.load_latest(target) == 1
    assert float(target["app"]["w"][0]) == 5.0  # type: ignore[index]


def test_a_lent_slot_is_written_again_only_once_the_upload_is_done(
    tmp_path: Path, background: bool
) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0, background=background)
    live = Weights()
    live.set(1.0, 1)
    memory.maybe_save(1, live)  # slot 0
    lent = memory.lend(1)
    assert lent is not None
    upload: Future[None] = Future()  # a checkpoint's upload still writing from slot 0
    lent.hold_until(upload)
    live.set(2.0, 2)
    memory.maybe_save(2, live)  # slot 1: not lent, written at once
    memory.wait()
    live.set(3.0, 3)
    third = threading.Thread(target=memory.maybe_save, args=(3, live))
    third.start()  # inline, the call waits; in the background, its copy does
    third.join(timeout=2.0)
    assert {slot.step() for slot in memory.own_slots()} == {1, 2}, "slot 0 was written early"
    upload.set_result(None)
    third.join(timeout=60)
    assert not third.is_alive()
    memory.wait()
    fresh = Weights(-1.0)
    assert memory.load(fresh, storage_step=None) == 3
    assert float(fresh.weights[0]) == 3.0


def test_when_the_snapshots_copy_failed_the_checkpoint_copies_the_live_state(
    tmp_path: Path, background: bool
) -> None:
    memory = MemorySnapshots(tmp_path / "gone", 2, 0, background=background)  # never made
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    live.set(2.0, 2)
    memory.maybe_save(2, live)  # its copy fails: no directory
    memory.wait_staged()
    live.weights.fill_(7.0)
    manager.save(2, {"app": live}, snapshot=memory.lend(2))
    manager.wait()
    assert stored(manager) == (2, 7.0, 2.0), "staged from the live state after all"


def test_where_the_stager_cannot_be_reused_each_checkpoint_takes_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch 2.11 (`devices.stager_reusable`): every save stages with a fresh stager, the last
    one closed, and each is committed."""
    monkeypatch.setattr(devices, "stager_reusable", lambda: False)
    manager = CheckpointManager(str(tmp_path / "checkpoints"))
    live = Weights()
    stagers = []
    for step in (1, 2, 3):
        live.set(float(step), step)
        manager.save(step, {"app": live})
        stagers.append(manager._stager)
        manager.wait()
    assert len({id(stager) for stager in stagers}) == 3
    assert stored(manager) == (3, 3.0, 3.0)
