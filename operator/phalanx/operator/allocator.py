"""glibc's malloc, set for the operator process: its arenas capped, its mmap threshold fixed.

glibc gives a thread that allocates while others hold the arenas an arena of its own, up to 8 per
core, and returns little of an arena's free space to the system. The operator runs
`api_workers` threads (64 by default) that decode API responses, so part of its resident memory
is that free space, spread over arenas. Capping the arenas (what `MALLOC_ARENA_MAX` does, set
here so that any way of starting the operator gets it) trades a little lock contention, under a
GIL that serialises most allocations anyway, for a smaller process (docs/figures.md,
"The operator's memory").

glibc also serves a large block with a mapping of its own, returned to the system when freed,
but raises that threshold each time such a block is freed: after the
first large buffers (a watch stream's reads, a list's answer) come and go, later ones are
carved from the arenas, whose free space stays resident. Fixing the threshold (what
`MALLOC_MMAP_THRESHOLD_` does; it also stops the raising) keeps large buffers out of the arenas,
for less resident memory than a periodic `malloc_trim` and no work every few seconds. The cost:
each large buffer's pages are faulted in afresh (docs/figures.md, "The operator's memory")."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
"""mallopt's parameter for the arena cap (glibc's malloc.h)."""
M_MMAP_THRESHOLD = -3
"""mallopt's parameter for the size from which a block is mapped on its own (glibc's malloc.h)."""


def cap_arenas(arenas: int) -> bool:
    """Allow at most `arenas` malloc arenas from now on (0: glibc's default). Call it before
    starting threads: a thread keeps the arena it first allocated from. False where the C
    library is not glibc (musl has no arenas to cap) or refuses the value."""
    return arenas != 0 and _mallopt(M_ARENA_MAX, arenas, f"a cap of {arenas} malloc arenas")


def fix_mmap_threshold(size: int) -> bool:
    """Map every block of `size` bytes or more on its own, from now on and for good (0: glibc's
    rising threshold). False where the C library is not glibc or refuses the value."""
    return size != 0 and _mallopt(M_MMAP_THRESHOLD, size, f"an mmap threshold of {size} bytes")


def _mallopt(parameter: int, value: int, what: str) -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None)
    if mallopt is None:
        return False
    accepted = bool(mallopt(parameter, value))
    if not accepted:
        log.warning("the C library refused %s", what)
    return accepted
