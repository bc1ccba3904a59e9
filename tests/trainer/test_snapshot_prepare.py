"""A rank's two snapshot slots have their pages made beside the first steps
(`MemorySnapshots.prepare`), so that the first snapshot into each only copies; a slot that holds
a snapshot (a restarted worker's pod) keeps it. Real files in the pod's memory directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from phalanx.resume.memory import MemorySnapshots


class State:
    """A stateful of 1 MiB of float32, filled with `value`."""

    def __init__(self, value: float) -> None:
        self.weights = torch.full((1 << 18,), value)

    def state_dict(self) -> dict[str, Any]:
        return {"w": self.weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights.copy_(state["w"])


def allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def test_prepared_slots_hold_their_pages_before_the_first_snapshot(tmp_path: Path) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)
    live = State(1.0)
    memory.prepare(live)
    memory.wait()
    size = live.weights.nbytes
    for slot in memory.own_slots():
        assert slot.ready(size)
        assert allocated(slot.data) >= size, "every page of the slot made"
    assert memory.maybe_save(10, live)
    assert not memory.first_use, "the first snapshot found its slot ready"
    memory.close()


def test_preparing_keeps_the_snapshot_a_slot_holds(tmp_path: Path) -> None:
    before = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)
    before.maybe_save(10, State(0.1))
    before.close()
    after = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)  # the restarted worker
    after.prepare(State(0.0))
    after.wait()
    restored = State(-1.0)
    assert after.load(restored, storage_step=None) == 10
    assert torch.equal(restored.weights, torch.full((1 << 18,), 0.1))
    after.close()
