"""A rank's empty snapshot slots are mapped with every page made and mapped before the first
snapshot (`MemorySnapshots.prepare`), at the end of the run's first optimizer step
(`Resumable`), so that no snapshot faults pages in while training; a slot that holds a snapshot
(a restarted worker's pod) keeps it. Real files in the pod's memory directory, the process's
own mappings read from /proc (Linux)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from phalanx.resume import Resumable
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.settings import CheckpointSettings

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")


class State:
    """A stateful of 1 MiB of float32, filled with `value`."""

    def __init__(self, value: float) -> None:
        self.weights = torch.full((1 << 18,), value)

    def state_dict(self) -> dict[str, Any]:
        return {"w": self.weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights.copy_(state["w"])


def resident(path: Path) -> int:
    """Bytes of `path` mapped into this process with a page behind them (its mappings' Rss)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == str(path.resolve())
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def test_prepared_slots_are_mapped_with_their_pages_before_the_first_snapshot(
    tmp_path: Path,
) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)
    live = State(1.0)
    memory.prepare(live)
    size = live.weights.nbytes
    for slot in memory.own_slots():
        assert slot.ready(size)
        assert slot.data.stat().st_blocks * 512 >= size, "every page of the file made"
        assert resident(slot.data) >= size, "and mapped here: the first copy faults none"
    assert memory.maybe_save(10, live)
    assert not memory.first_use, "the first snapshot found its slot ready"
    memory.close()


def test_preparing_keeps_the_snapshot_a_slot_holds(tmp_path: Path) -> None:
    before = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)
    before.maybe_save(10, State(0.1))
    before.close()
    after = MemorySnapshots(tmp_path, interval_steps=10, local_rank=0)  # the restarted worker
    after.prepare(State(0.0))
    restored = State(-1.0)
    assert after.load(restored, storage_step=None) == 10
    assert torch.equal(restored.weights, torch.full((1 << 18,), 0.1))
    after.close()


@pytest.fixture
def one_rank() -> Iterator[None]:
    """A real single-member group, as a worker has."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


@pytest.mark.usefixtures("one_rank")
def test_a_run_makes_its_slots_within_its_first_optimizer_step(tmp_path: Path) -> None:
    """The optimizer's state exists only after its first step (AdamW makes it lazily): the
    slots are made for the whole state then, before the program's own code goes on. A
    program's own post-step hook, registered after the library's, still runs at each step."""
    settings = CheckpointSettings(location=str(tmp_path / "checkpoints"),
                                  memory_dir=str(tmp_path), memory_interval_steps=10)  # fmt: skip
    model = nn.Linear(256, 256)
    optimizer = torch.optim.AdamW(model.parameters())
    run = Resumable(model, optimizer, dataset_size=64, global_batch=4, settings=settings)
    seen: list[int] = []
    optimizer.register_step_post_hook(lambda *_: seen.append(run.step))
    model(torch.ones(1, 256)).sum().backward()
    slots = run.memory.own_slots()
    assert all(resident(slot.data) == 0 for slot in slots), "nothing made before the step"
    optimizer.step()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert all(resident(slot.data) >= 3 * weights for slot in slots), (
        "made for the parameters and AdamW's two moments, before step_done"
    )
    run.step_done(report=False)
    optimizer.step()
    assert seen == [0, 1], "the program's own hook ran at each step"
    run.close()


@pytest.mark.usefixtures("one_rank")
def test_a_resumed_run_trains_first_and_makes_no_slot_in_its_first_step(tmp_path: Path) -> None:
    """A replacement resuming after a failure is training again as soon as it can: its empty
    slot is made by its first snapshot into it, not within the step that ends its recovery (nor
    within the load, which steps the optimizer to make its state)."""
    settings = CheckpointSettings(location=str(tmp_path / "checkpoints"),
                                  memory_dir=str(tmp_path), memory_interval_steps=1)  # fmt: skip

    def started() -> tuple[nn.Linear, torch.optim.AdamW, Resumable]:
        model = nn.Linear(256, 256)
        optimizer = torch.optim.AdamW(model.parameters())
        run = Resumable(model, optimizer, dataset_size=64, global_batch=4, settings=settings)
        return model, optimizer, run

    def first_run() -> None:
        model, optimizer, run = started()
        model(torch.ones(1, 256)).sum().backward()
        optimizer.step()
        run.step_done(report=False)  # its snapshot of step 1
        run.close()

    first_run()
    gc.collect()  # its mappings of the slots go with it, as with the worker that was killed
    model, optimizer, again = started()
    assert again.resume() == 1
    model(torch.ones(1, 256)).sum().backward()
    optimizer.step()
    empty = [slot for slot in again.memory.own_slots() if slot.step() is None]
    assert empty, "one slot held step 1, the other nothing"
    assert resident(empty[0].data) == 0, "not made within the first step after the resume"
    again.step_done(report=False)
    again.close()
