"""Where a memory snapshot lives: a rank's tensors as raw bytes in a file under its pod's memory
directory, copied in place, never pickled.

Why not `torch.save`: it pickles the state and writes it record by record under the GIL, on a
thread that the training thread then shares the interpreter with (docs/figures.md, "Snapshots").
Here a snapshot is a slot: a file
sized once to the state and mapped into memory (a preallocated host buffer, reused from one
snapshot to the next), into which every tensor is copied by one `torch._foreach_copy_` call,
which releases the GIL. On a GPU the mapping is registered with CUDA (pinned), so the
device-to-host copies are DMA transfers on a stream of their own. Only a small header is
pickled: the state's structure with each tensor replaced by its index (`Leaf`), the non-tensor
values, and each tensor's dtype, shape and offset.

Whole or absent: a slot is two files, `<name>.<k>.bin` (the bytes) and `<name>.<k>.meta` (the
header). The header is removed before the bytes are overwritten and written (to a temporary
name, then renamed) once they are complete, so a slot that has a header is whole.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import pickle
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

ALIGN = 64
"""Every tensor starts at a multiple of this many bytes (any dtype may view it; cache lines)."""


@dataclass(frozen=True)
class Unit:
    """What a slot holds. `kind` "shard": rank `owner`'s own state in a world of `of` ranks (an
    FSDP or tensor-parallel shard, usable by that rank of that world only); "piece": piece
    `owner` of `of` of a replicated (DDP) state, usable by any rank holding the same `part`."""

    step: int
    part: str
    kind: str
    owner: int
    of: int


@dataclass(frozen=True)
class Leaf:
    """A tensor's place in a skeleton: its index in the flattened state."""

    index: int


@dataclass(frozen=True)
class Entry:
    """One tensor of a slot: where its bytes start, and how to view them."""

    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        numel = 1
        for size in self.shape:
            numel *= size
        return numel * self.dtype.itemsize


@dataclass(frozen=True)
class Header:
    """A slot's description: its unit, the state's skeleton (pickled on the training thread, so
    that later changes to its plain values cannot reach it), and its tensors (leaves `first` to
    `first + len(entries)` of the flattened state)."""

    unit: Unit
    skeleton: bytes
    first: int
    entries: tuple[Entry, ...]
    size: int

    def dumps(self) -> bytes:
        return pickle.dumps(self)

    @staticmethod
    def loads(data: bytes) -> Header:
        header = pickle.loads(data)  # our pod's memory directory, or a peer's
        if not isinstance(header, Header):
            raise ValueError("not a snapshot header")
        return header


def flatten(
    state: Any, leaf: Callable[[torch.Tensor], torch.Tensor] | None = None
) -> tuple[Any, list[torch.Tensor]]:
    """The state's skeleton (each tensor replaced by its `Leaf`) and its tensors, in order
    (each passed through `leaf` first, when given)."""
    tensors: list[torch.Tensor] = []

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            tensors.append(value if leaf is None else leaf(value))
            return Leaf(len(tensors) - 1)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(walk(item) for item in value)
        return value

    return walk(state), tensors


def unflatten(skeleton: Any, tensors: list[torch.Tensor]) -> Any:
    """The state a skeleton describes, its leaves replaced by `tensors`."""
    if isinstance(skeleton, Leaf):
        return tensors[skeleton.index]
    if isinstance(skeleton, dict):
        return {key: unflatten(item, tensors) for key, item in skeleton.items()}
    if isinstance(skeleton, list | tuple):
        return type(skeleton)(unflatten(item, tensors) for item in skeleton)
    return skeleton


def layout(tensors: list[torch.Tensor]) -> tuple[tuple[Entry, ...], int]:
    """Each tensor's entry, packed in order at aligned offsets, and the bytes they need."""
    entries, offset = [], 0
    for tensor in tensors:
        entry = Entry(offset, tensor.dtype, tuple(tensor.shape))
        entries.append(entry)
        offset += -(-entry.nbytes // ALIGN) * ALIGN
    return tuple(entries), offset


def pieces(tensors: list[torch.Tensor], count: int) -> list[tuple[int, int]]:
    """`count` contiguous ranges of `tensors` with about equal bytes: the pieces the ranks of a
    pod write of a replicated state (so that the pod holds one copy, not one per rank)."""
    prefix = [0]
    for tensor in tensors:
        prefix.append(prefix[-1] + tensor.numel() * tensor.element_size())
    cuts, start = [0], 0
    for index in range(1, count):  # each cut at the boundary nearest its share of the bytes
        target = prefix[-1] * index / count
        start = min(range(start, len(prefix)), key=lambda j: abs(prefix[j] - target))
        cuts.append(start)
    cuts.append(len(tensors))
    return list(itertools.pairwise(cuts))


def views(buffer: torch.Tensor, entries: tuple[Entry, ...]) -> list[torch.Tensor]:
    """The tensors of a slot's bytes (views: nothing is copied)."""
    return [buffer[e.offset : e.offset + e.nbytes].view(e.dtype).view(e.shape) for e in entries]


class Slot:
    """One slot in a pod's memory directory (see the module's docstring)."""

    def __init__(self, directory: Path, name: str, pin: bool = False) -> None:
        self.data = directory / f"{name}.bin"
        self.meta = directory / f"{name}.meta"
        self.pin = pin
        """Register the mapping with CUDA, so device-to-host copies into it are asynchronous."""
        self._mapped: torch.Tensor | None = None
        self._views: tuple[tuple[Entry, ...], list[torch.Tensor]] | None = None
        self._registered = False
        self._step: int | None = None
        self._known = False

    def header(self) -> Header | None:
        """The slot's header; None when it is being written, absent or unreadable."""
        try:
            return Header.loads(self.meta.read_bytes())
        except FileNotFoundError:
            return None
        except Exception as error:  # a header from another version, a torn file
            log.warning("memory snapshot %s unreadable: %s", self.meta, error)
            return None

    def step(self) -> int | None:
        """The step of the slot's whole snapshot (None: none), read once, then kept as this
        object writes the slot: the writer asks at every snapshot."""
        if not self._known:
            header = self.header()
            self._step, self._known = (header.unit.step if header else None), True
        return self._step

    def invalidate(self) -> None:
        self.meta.unlink(missing_ok=True)
        self._step, self._known = None, True

    def buffer(self, size: int) -> torch.Tensor:
        """The slot's bytes, `size` of them, mapped for writing (kept while the size holds)."""
        size = max(size, ALIGN)
        if self._mapped is None or self._mapped.numel() != size:
            self.release()
            self.data.touch()
            os.truncate(self.data, size)
            self._views = None
            self._mapped = torch.from_file(
                str(self.data), shared=True, size=size, dtype=torch.uint8
            )
            if self.pin:
                self._register()
        return self._mapped

    def prepare(self, size: int) -> None:
        """Map an empty slot for `size` bytes with every page made and mapped, so that its first
        snapshot only copies. That first use was the costliest part of snapshots (docs/figures.md,
        "Snapshots"). Made here in two kernel calls, `fallocate` (the file's pages) and `populate`
        (this process's mappings of them), rather than by faults at each page's first write. The
        caller runs it before training's steady state, on the training thread: beside training the
        same work stalled a step for seconds (page allocation and the process's memory map taken
        from training's own allocations). On a GPU the mapping is pinned instead, which makes its
        pages too. A slot holding a snapshot (a restarted worker's pod) is left as it is: its pages
        exist, and mapping it would size the file to the new state, cutting a larger snapshot
        short."""
        if self.step() is not None:
            return
        size = max(size, ALIGN)
        self.data.touch()
        with self.data.open("r+b") as file:
            os.posix_fallocate(file.fileno(), 0, size)
        buffer = self.buffer(size)
        if not self._registered:
            populate(buffer)

    def ready(self, size: int) -> bool:
        """Whether `buffer(size)` is mapped with its pages made (`prepare`, or a snapshot)."""
        return self.mapped(size)

    def mapped(self, size: int) -> bool:
        """Whether `buffer(size)` is mapped already (else its next use maps and touches it)."""
        return self._mapped is not None and self._mapped.numel() == max(size, ALIGN)

    def tensors(self, entries: tuple[Entry, ...], size: int) -> list[torch.Tensor]:
        """`views` of the slot's bytes for writing, made once while the layout holds (a
        snapshot of the quickstart's model has 81 tensors: their views cost as much as the copy)."""
        buffer = self.buffer(size)
        if self._views is None or self._views[0] is not entries:
            self._views = entries, views(buffer, entries)
        return self._views[1]

    def commit(self, header: Header) -> None:
        temporary = self.meta.with_suffix(".tmp")
        temporary.write_bytes(header.dumps())
        temporary.replace(self.meta)
        self._step, self._known = header.unit.step, True

    def read(self) -> tuple[Header, torch.Tensor] | None:
        """The slot's header and bytes (mapped copy-on-write: pages are read when touched)."""
        header = self.header()
        if header is None:
            return None
        try:
            data = torch.from_file(
                str(self.data), shared=False, size=max(header.size, ALIGN), dtype=torch.uint8
            )
        except RuntimeError as error:  # shorter than its header says
            log.warning("memory snapshot %s unreadable: %s", self.data, error)
            return None
        return header, data

    def release(self) -> None:
        """Unmap (and unpin) the slot's bytes; the files stay."""
        if self._mapped is not None and self._registered:
            torch.cuda.cudart().cudaHostUnregister(self._mapped.data_ptr())  # type: ignore[no-untyped-call]
        self._mapped, self._views, self._registered = None, None, False

    def _register(self) -> None:
        assert self._mapped is not None
        code = torch.cuda.cudart().cudaHostRegister(  # type: ignore[no-untyped-call]
            self._mapped.data_ptr(), self._mapped.numel(), 0
        )
        self._registered = int(code) == 0
        if not self._registered:
            log.warning("memory snapshot buffer not pinned (CUDA error %s): copies block", code)


MADV_POPULATE_WRITE = 23
"""madvise(2)'s advice to fault a range's pages in for writing, in the kernel (Linux 5.14)."""


def populate(buffer: torch.Tensor) -> None:
    """Make and map every page of a mapped buffer before its first write, in one call: faults at
    each page's first write cost the snapshot they fell in seconds at real sizes
    (docs/figures.md, "Snapshots"). Where the kernel has no such advice the
    buffer is zeroed instead (the same faults, taken now)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        start, length = ctypes.c_void_p(buffer.data_ptr()), ctypes.c_size_t(buffer.numel())
        if libc.madvise(start, length, MADV_POPULATE_WRITE) == 0:
            return
    buffer.zero_()


def older(slots: tuple[Slot, Slot]) -> Slot:
    """The slot to write next: an empty one, else the one holding the older step."""
    first, second = slots
    steps = first.step(), second.step()
    if steps[0] is None:
        return first
    if steps[1] is None:
        return second
    return first if steps[0] <= steps[1] else second


def assemble(units: tuple[Unit, ...], held: dict[Unit, Slot],
             received: dict[Unit, tuple[Header, torch.Tensor] | None]) -> Any:  # fmt: skip
    """The saved state from its units: pieces in order, each a view of its slot's bytes."""
    parts = []
    for unit in units:
        got = received[unit] if unit in received else held[unit].read()
        if got is None:
            raise ValueError(f"memory snapshot {unit} is gone")
        header, data = got
        parts.append((header, views(data, header.entries)))
    parts.sort(key=lambda part: part[0].first)
    tensors = [tensor for _, part in parts for tensor in part]
    return unflatten(pickle.loads(parts[0][0].skeleton), tensors)
