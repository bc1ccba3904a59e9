"""A memory snapshot names the state's tensors once (`AppState.snapshot_state_dict`), and what it
copies is still what `state_dict()` gives at that step: after training steps, when it was first
named before any step, after the learning rate changes, and for a module with extra state. And a
snapshot whose tensors change shape between two snapshots lays them out anew. One process, no
process group: `get_state_dict` and the slots work the same without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.state import AppState, TrainingProgress


def app(model: nn.Module | None = None) -> AppState:
    torch.manual_seed(0)
    model = model or nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return AppState(model, torch.optim.AdamW(model.parameters(), lr=0.1), TrainingProgress())


def train(state: AppState, steps: int = 1) -> None:
    for _ in range(steps):
        state.model(torch.randn(3, 4)).sum().backward()
        state.optimizer.step()
        state.optimizer.zero_grad()
        state.progress.step += 1


def same(left: Any, right: Any) -> bool:
    """The same structure, equal tensors and equal plain values."""
    if isinstance(left, dict):
        return (
            isinstance(right, dict)
            and left.keys() == right.keys()
            and all(same(left[key], right[key]) for key in left)
        )
    if isinstance(left, torch.Tensor):
        return isinstance(right, torch.Tensor) and torch.equal(left, right)
    return bool(left == right)


def test_the_kept_names_give_the_values_of_each_step() -> None:
    state = app()
    train(state)
    first = state.snapshot_state_dict()
    train(state, 3)
    assert same(state.snapshot_state_dict(), state.state_dict())
    assert not torch.equal(first["model"]["0.weight"], app().state_dict()["model"]["0.weight"]), (
        "the kept tensors are the live ones: they moved with training"
    )


def test_a_state_named_before_the_first_step_or_a_new_learning_rate_is_seen() -> None:
    state = app()
    state.snapshot_state_dict()  # before any step (get_state_dict makes the optimizer's state)
    train(state)
    assert same(state.snapshot_state_dict(), state.state_dict())
    for group in state.optimizer.param_groups:
        group["lr"] = 0.01
    lrs = {v for k, v in state.snapshot_state_dict()["optim"].items() if k.endswith(".lr")}
    assert lrs == {0.01}


class Counted(nn.Linear):
    """A module whose extra state is built anew at every call, as some modules' is."""

    calls = 0

    def get_extra_state(self) -> Any:
        Counted.calls += 1
        return {"calls": Counted.calls}

    def set_extra_state(self, state: Any) -> None:
        pass


def test_a_module_with_extra_state_is_named_anew_each_time() -> None:
    state = app(nn.Sequential(Counted(4, 2)))
    train(state)
    first = state.snapshot_state_dict()["model"]["0._extra_state"]
    second = state.snapshot_state_dict()["model"]["0._extra_state"]
    assert second["calls"] > first["calls"]


class Reshaped:
    """A stateful whose tensor keeps its bytes but changes shape, then grows."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def state_dict(self) -> dict[str, Any]:
        return {"t": self.tensor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tensor.copy_(state["t"])


def test_a_tensor_that_changes_shape_is_laid_out_anew(tmp_path: Path) -> None:
    memory = MemorySnapshots(tmp_path, interval_steps=1, local_rank=0)
    memory.maybe_save(1, Reshaped(torch.arange(4.0)))
    memory.wait()
    for step, tensor in ((2, torch.arange(4.0).reshape(2, 2) + 10), (3, torch.arange(6.0) + 20)):
        memory.maybe_save(step, Reshaped(tensor))
        memory.wait()
        fresh = Reshaped(torch.zeros_like(tensor))
        assert memory.load(fresh, storage_step=None) == step
        assert torch.equal(fresh.tensor, tensor)
