"""A checkpoint staged from the memory snapshot of the same step: one copy of the state where
there were two (DLRover's flash checkpoint: persist from the in-memory copy).

Why: an async DCP save first stages the whole state into host memory (`devices.stager`), and on
the CPU torch's stager copies each storage while holding the GIL, in a thread beside training.
A memory snapshot taken at the same step has just copied the same tensors into its slot
(`arena`: one `_foreach_copy_`, the GIL released): with both copies the step after a checkpoint
took several times as long as with the checkpoint's copy alone (docs/figures.md, "Snapshots").
Staged from the slot, the checkpoint copies nothing more.

The slot is lent, not copied: the snapshot after next writes it again, so `MemorySnapshots`
waits for the upload to finish before it does (`LentSnapshot.returned`). When the snapshot
cannot stand for the checkpoint (a DDP piece, not the whole state; a state whose tensors differ
from the snapshot's; a copy that failed; no numpy), the checkpoint stages as before.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.checkpoint.staging import AsyncStager
from torch.distributed.tensor import DTensor

from phalanx.resume import arena

log = logging.getLogger(__name__)

NUMPY = importlib.util.find_spec("numpy") is not None
"""Whether numpy is installed, through which a tensor of its own storage is made over a slot's
bytes (`in_slot`); an image with torch but without numpy stages as before."""

Copied = Future[torch.Tensor | None]
"""A snapshot's copy: the slot's bytes once they hold the state; None if the copy failed."""


@dataclass
class LentSnapshot:
    """The snapshot of `step`, lent to the checkpoint of the same step until `returned`: its
    tensors' places in the slot, and the slot's bytes once they hold the state (`copied`)."""

    step: int
    entries: tuple[arena.Entry, ...]
    copied: Copied
    returned: threading.Event = field(default_factory=threading.Event)

    def matches(self, state_dict: Any) -> bool:
        """Whether the state's tensors are the snapshot's: their number, dtypes and local
        shapes, in order (the checkpoint's state dict and the snapshot's are built alike)."""
        _, leaves = arena.flatten(state_dict)
        return len(leaves) == len(self.entries) and all(
            _local(leaf).dtype == entry.dtype and tuple(_local(leaf).shape) == entry.shape
            for leaf, entry in zip(leaves, self.entries, strict=True)
        )

    def hold_until(self, done: Future[Any]) -> None:
        """Keep the slot lent until `done` (the checkpoint's upload) completes, however."""
        done.add_done_callback(lambda _: self.returned.set())


def in_slot(state_dict: Any, data: torch.Tensor, entries: tuple[arena.Entry, ...]) -> Any:
    """`state_dict` with each tensor replaced by the slot's copy of it (a DTensor by one with
    the same mesh and placements around its local copy).

    Each copy is a tensor of its own storage over its bytes of the slot (through numpy), not a
    view of the slot's one storage: DCP's writer clones a tensor whose storage is larger than
    the tensor, which would copy the whole state once more in the upload thread."""
    skeleton, leaves = arena.flatten(state_dict)
    whole = data.numpy()
    copies = [
        _like(
            leaf,
            torch.from_numpy(whole[e.offset : e.offset + e.nbytes]).view(e.dtype).view(e.shape),
        )
        for leaf, e in zip(leaves, entries, strict=True)
    ]
    return arena.unflatten(skeleton, copies)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _like(leaf: torch.Tensor, copy: torch.Tensor) -> torch.Tensor:
    if not isinstance(leaf, DTensor):
        return copy
    return DTensor.from_local(
        copy, leaf.device_mesh, leaf.placements, run_check=False,
        shape=leaf.shape, stride=leaf.stride(),
    )  # fmt: skip


class FromSnapshot(AsyncStager):
    """DCP's staging step served by a lent snapshot, else by `fallback` (the usual stager)."""

    _synchronize_after_execute = False

    def __init__(self, lent: LentSnapshot, fallback: AsyncStager) -> None:
        self.lent = lent
        self.fallback = fallback

    def stage(self, state_dict: Any) -> Future[Any] | Any:
        if not NUMPY or not self.lent.matches(state_dict):
            self.lent.returned.set()
            return self.fallback.stage(state_dict)
        staged: Future[Any] = Future()

        def when_copied(copied: Copied) -> None:
            data = copied.result()
            try:
                if data is not None:
                    staged.set_result(in_slot(state_dict, data, self.lent.entries))
                    return
            except (RuntimeError, ValueError, TypeError) as error:  # not left unresolved
                log.warning("checkpoint not staged from the memory snapshot: %s", error)
            self.lent.returned.set()  # the copy failed: stage the live state after all
            try:
                result = self.fallback.stage(state_dict)
                staged.set_result(result.result() if isinstance(result, Future) else result)
            except BaseException as error:
                staged.set_exception(error)

        self.lent.copied.add_done_callback(when_copied)
        return staged

    def synchronize_staging(self) -> None:
        """Nothing: callers wait on the staging future (`AsyncSaveResponse`)."""

    def close(self) -> None:
        """Nothing of its own: the fallback belongs to the checkpoint manager."""
