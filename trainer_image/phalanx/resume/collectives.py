"""Agreement among ranks: one small collective so that every rank takes the same branch."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from phalanx.resume import devices


def all_ok(ok: bool, group: dist.ProcessGroup | None = None) -> bool:
    """True on every rank only if `ok` is true on every rank (without a process group: `ok`):
    so that all ranks take the same branch after a step that may fail on some of them."""
    if not dist.is_initialized():
        return ok
    flag = torch.tensor([0 if ok else 1], device=devices.for_group(group))
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    return int(flag.item()) == 0


def set_collective_timeout(seconds: int) -> None:
    """The default group's timeout from now on. Called after the first step: the start-up's long
    timeout (peers arriving, images pulling) is over, and a collective that now takes this long
    means a hung peer. torch reads no variable for it, so the library sets it."""
    set_timeout = getattr(dist, "set_timeout", None)
    if set_timeout is not None and dist.is_initialized():
        set_timeout(timedelta(seconds=seconds))


def rank_and_world() -> tuple[int, int]:
    """This process's global rank and the world's size; (0, 1) without a process group."""
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
