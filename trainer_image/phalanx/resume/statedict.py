"""The state dict as a snapshot sees it: the local part of each sharded tensor, whether the
state is replicated or sharded, and copying saved values into the live state in place.

Why in place: the live state's tensors are the ones the model and optimizer use (an FSDP
parameter's local shard, on its device); loading a snapshot copies into them, after checking
every shape, instead of replacing them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.tensor import DTensor

from phalanx.resume import arena


def local_tensors(state: Any) -> tuple[Any, list[torch.Tensor], bool]:
    """`arena.flatten` of the state with every DTensor replaced by its local part (a view:
    nothing is copied), and whether there was one (the state is sharded, not replicated)."""
    sharded = False

    def local(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal sharded
        if isinstance(tensor, DTensor):
            sharded = True
            return tensor.to_local()
        return tensor

    skeleton, tensors = arena.flatten(state, local)
    return skeleton, tensors, sharded


def has_shards(value: Any) -> bool:
    """Any DTensor in the state: it is sharded (FSDP, tensor parallel), not replicated."""
    if isinstance(value, dict):
        return any(has_shards(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(has_shards(item) for item in value)
    return isinstance(value, DTensor)


def restore_into(current: Any, saved: Any) -> Any:
    """`current` (the live state dict, whose tensors have the layout this rank needs) with the
    saved values copied in. Everything is checked before anything is copied: a snapshot whose
    structure or shapes differ raises ValueError and leaves the live state untouched."""
    copies: list[tuple[torch.Tensor, torch.Tensor]] = []
    merged = _pair(current, saved, "state", copies)
    with torch.no_grad():
        for target, source in copies:
            target.copy_(source)
    return merged


def _pair(current: Any, saved: Any, where: str, copies: list[tuple[torch.Tensor, Any]]) -> Any:
    if isinstance(current, dict):
        if not isinstance(saved, dict) or set(saved) != set(current):
            raise ValueError(f"{where}: the snapshot's keys differ")
        return {key: _pair(current[key], saved[key], f"{where}.{key}", copies) for key in current}
    if isinstance(current, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(current):
            raise ValueError(f"{where}: the snapshot's length differs")
        return type(current)(
            _pair(c, s, f"{where}[{i}]", copies)
            for i, (c, s) in enumerate(zip(current, saved, strict=True))
        )
    if isinstance(current, torch.Tensor):
        local = current.to_local() if isinstance(current, DTensor) else current
        if not isinstance(saved, torch.Tensor) or saved.shape != local.shape:
            raise ValueError(f"{where}: the snapshot's shape differs")
        copies.append((local, saved))
        return current
    return saved
