"""Everything a checkpoint holds, as one DCP Stateful: model, optimizer and progress, with
torch's distributed state-dict helpers doing the resharding (DDP, FSDP2, DTensor alike).

Why a flattened optimizer state dict: the nested form keeps one list of parameter names per
param group, and under pipeline parallelism each stage has a different list under the same key,
of which a checkpoint keeps one. Flattened, every entry is keyed by its parameter's name
(`param_groups.layers.3.attention.wq.weight.lr`), as the model's are, so the stages' entries
never collide and a checkpoint loads into any layout (torchtitan does the same).

Everything resumable besides the model and optimizer is one object, `TrainingProgress`
(torchtune's habit): the step, the global sample position, the world size at save, and the RNG
state ride inside every checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.tensor import DTensor
from torch.optim import Optimizer

OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


@dataclass
class TrainingProgress:
    """The counters a resumed run continues from."""

    step: int = 0
    position: int = 0
    """Samples the whole job consumed so far: the global sampler's state."""
    world_size_at_save: int = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "position": self.position,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.position = int(state["position"])
        self.world_size_at_save = int(state["world_size"])
        torch.set_rng_state(state["rng"])


@dataclass
class AppState(Stateful):
    model: nn.Module
    optimizer: Optimizer
    progress: TrainingProgress
    _kept: tuple[tuple[Any, ...], dict[str, Any]] | None = field(
        default=None, init=False, repr=False
    )

    def state_dict(self) -> dict[str, Any]:
        model, optimizer = get_state_dict(self.model, self.optimizer, options=OPTIONS)
        return {"model": model, "optim": optimizer, "progress": self.progress.state_dict()}

    def snapshot_state_dict(self) -> dict[str, Any]:
        """`state_dict()` for a memory snapshot, without naming every tensor again each time.

        Why: `get_state_dict` walks the module and the optimizer to give each tensor its name, the
        same names every step. For a small model that walk was half of what a snapshot cost the
        training thread (docs/figures.md, "Snapshots"). Its tensors share storage with the live ones
        (the parameters detached, the optimizer's own state tensors), so a kept result holds the
        current values; it is kept while everything the walk read is unchanged (`_structure`) and
        the module has no extra state, which `get_extra_state` may build anew at every call."""
        structure = _structure(self.model, self.optimizer)
        if self._kept is None or self._kept[0] != structure:
            model, optimizer = get_state_dict(self.model, self.optimizer, options=OPTIONS)
            if _has_extra_state(self.model):
                return {"model": model, "optim": optimizer, "progress": self.progress.state_dict()}
            # read again: before the first optimizer step, get_state_dict creates its state
            self._kept = (
                _structure(self.model, self.optimizer),
                {"model": model, "optim": optimizer},
            )
        return {**self._kept[1], "progress": self.progress.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state_dict["model"],
            optim_state_dict=state_dict["optim"],
            options=OPTIONS,
        )
        self.progress.load_state_dict(state_dict["progress"])
        self._kept = None


def _structure(model: nn.Module, optimizer: Optimizer) -> tuple[Any, ...]:
    """What `get_state_dict`'s result depends on, cheaply compared: each parameter's and
    buffer's name and storage, the optimizer's state (each tensor's storage and shape, each plain
    value) and its hyperparameters."""
    tensors = tuple(
        (name, _storage(t)) for name, t in (*model.named_parameters(), *model.named_buffers())
    )
    state = tuple(
        (id(param), tuple((key, _value(value)) for key, value in values.items()))
        for param, values in optimizer.state.items()
    )
    groups = tuple(
        tuple((key, tuple(map(id, value)) if key == "params" else _value(value))
              for key, value in group.items())
        for group in optimizer.param_groups
    )  # fmt: skip
    return tensors, state, groups


def _has_extra_state(model: nn.Module) -> bool:
    """Whether a module of `model` has extra state, which it may build anew at every call."""
    return any(type(m).get_extra_state is not nn.Module.get_extra_state for m in model.modules())


def _value(value: Any) -> Any:
    """A tensor by its storage and shape (its values change in place), anything else as is."""
    return _storage(value) if isinstance(value, torch.Tensor) else value


def _storage(tensor: torch.Tensor) -> tuple[int, tuple[int, ...]]:
    local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
    return local.data_ptr(), tuple(local.shape)
