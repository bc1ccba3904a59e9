"""On a real GPU (`make test-gpu`): a memory snapshot of a state on the device copies into a
slot that CUDA sees as pinned (so the device-to-host copy is asynchronous, on a stream of its
own), holds the values of the step it was taken at although training changes the state right
after `wait_staged`, and restores them exactly into a fresh model and optimizer on the device."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from phalanx.resume import devices
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.state import AppState, TrainingProgress


def trained(steps: int) -> AppState:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 8))
    model.to(devices.device())
    optimizer = torch.optim.AdamW(model.parameters())
    state = AppState(model, optimizer, TrainingProgress())
    for _ in range(steps):
        advance(state)
    return state


def advance(state: AppState) -> None:
    state.optimizer.zero_grad()
    state.model(torch.ones(4, 512, device=devices.device())).square().mean().backward()
    state.optimizer.step()
    state.progress.step += 1


@pytest.mark.gpu
def test_a_gpu_state_is_snapshotted_into_pinned_memory_and_restored_exactly() -> None:
    assert devices.device().type == "cuda", "make test-gpu runs where a GPU is"
    state = trained(2)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as pod:
        memory = MemorySnapshots(Path(pod), 1, 0)
        assert memory.maybe_save(2, state)
        memory.wait_staged()
        expected = {k: v.detach().cpu().clone() for k, v in state.model.state_dict().items()}
        advance(state)  # the copy is taken: training may change the state now
        memory.wait()
        slot = memory.own_slots()[0]
        assert slot.buffer(slot.header().size).is_pinned(), "the slot is registered with CUDA"  # type: ignore[union-attr]
        fresh = trained(0)
        assert MemorySnapshots(Path(pod), 1, 0).load(fresh, storage_step=None) == 2
        memory.close()
    assert fresh.progress.step == 2
    for key, value in fresh.model.state_dict().items():
        assert value.device.type == "cuda"
        assert torch.equal(value.cpu(), expected[key]), key
