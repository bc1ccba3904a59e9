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

from dataclasses import dataclass
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

    def state_dict(self) -> dict[str, Any]:
        model, optimizer = get_state_dict(self.model, self.optimizer, options=OPTIONS)
        return {"model": model, "optim": optimizer, "progress": self.progress.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state_dict["model"],
            optim_state_dict=state_dict["optim"],
            options=OPTIONS,
        )
        self.progress.load_state_dict(state_dict["progress"])
