"""Memory snapshots on one rank (no process group): whole or absent, a copy of the step they were
taken at (the state may change once `wait_staged` returns), loaded only when not older than
storage and when they fit the live state, and off when asked. A pod holds one copy of a
replicated state for all its ranks. The multi-rank agreement runs in
tests/trainer/test_memory_agreement.py and for real in tests/local/test_inplace.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from phalanx.resume.memory import MemorySnapshots


class Counter:
    """A stateful with tensors and a plain value, like the trainer's AppState."""

    def __init__(self, size: int = 4, bias: int = 1) -> None:
        self.weights = torch.zeros(size)
        self.bias = torch.zeros(bias)
        self.step = 0

    def state_dict(self) -> dict[str, Any]:
        return {"model": {"w": self.weights, "b": self.bias}, "progress": {"step": self.step}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights.copy_(state["model"]["w"])
        self.bias.copy_(state["model"]["b"])
        self.step = state["progress"]["step"]


def advance(state: Counter, step: int) -> None:
    state.weights += 1
    state.bias += 1
    state.step = step


def test_a_snapshot_restores_the_state_of_its_step(tmp_path: Path) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=2, local_rank=0)
    live = Counter()
    taken = []
    for step in range(1, 6):
        memory.wait_staged()  # as the trainer's optimizer step does: the copy is taken
        advance(live, step)
        taken.append(memory.maybe_save(step, live))
    memory.wait()
    assert taken == [False, True, False, True, False]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "local-0.0.bin", "local-0.0.meta", "local-0.1.bin", "local-0.1.meta",
    ], "two slots (steps 2 and 4), no temporaries"  # fmt: skip

    fresh = Counter()
    assert memory.load(fresh, storage_step=0) == 4
    assert fresh.step == 4
    assert torch.equal(fresh.weights, torch.full((4,), 4.0)), "the snapshot is a copy of step 4"


def test_storage_wins_when_it_is_newer(tmp_path: Path) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0)
    live = Counter()
    advance(live, 3)
    memory.maybe_save(3, live)
    memory.wait()
    assert memory.load(Counter(), storage_step=5) is None
    assert memory.load(Counter(), storage_step=3) == 3, "as new as storage: memory is faster"


def test_a_snapshot_that_does_not_fit_the_live_state_is_not_loaded(tmp_path: Path) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0)
    live = Counter(size=4)
    advance(live, 1)
    memory.maybe_save(1, live)
    memory.wait()
    other = Counter(size=4, bias=2)  # "w" fits, "b" does not
    assert memory.load(other, storage_step=None) is None
    assert torch.equal(other.weights, torch.zeros(4)), "nothing was half-loaded"


def test_a_pod_holds_one_copy_of_a_replicated_state_for_all_its_ranks(tmp_path: Path) -> None:
    live = Counter()
    advance(live, 1)
    first = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0)
    first.maybe_save(1, live)
    first.wait()
    other = Counter()
    assert MemorySnapshots(tmp_path, 1, local_rank=1).load(other, None) == 1
    assert torch.equal(other.weights, torch.ones(4)), "local rank 1 read local rank 0's copy"
    assert MemorySnapshots(tmp_path / "elsewhere", 1, local_rank=0).load(Counter(), None) is None


def test_off_when_the_interval_is_zero_or_there_is_no_directory(tmp_path: Path) -> None:
    live = Counter()
    advance(live, 1)
    assert not MemorySnapshots(tmp_path, interval_steps=0, local_rank=0).maybe_save(1, live)
    assert not MemorySnapshots(None, interval_steps=1, local_rank=0).maybe_save(1, live)
    assert list(tmp_path.iterdir()) == []
