"""glibc's malloc, set for the operator process: its arenas capped, its mmap threshold fixed.

glibc gives a thread that allocates while others hold the arenas an arena of its own, up to 8 per
core, and returns little of an arena's free space to the system. The operator runs
`api_workers` threads (64 by default) that decode API responses, so part of its resident memory
is that free space, spread over arenas. Capping the arenas (what `MALLOC_ARENA_MAX` does, set
here so that any way of starting the operator gets it) trades a little lock contention, under a
GIL that serialises most allocations anyway, for a smaller process: bench/controlplane.py at
1 000 jobs measured 259 and 261 MiB peak with the cap of 2, 270 and 277 MiB without.

glibc also serves a block of 128 KiB or more with a mapping of its own, returned to the system
when freed, but raises that threshold (up to 32 MiB) each time such a block is freed: after the
first large buffers (a watch stream's reads, a list's answer) come and go, later ones are
carved from the arenas, whose free space stays resident. Fixing the threshold (what
`MALLOC_MMAP_THRESHOLD_` does; it also stops the raising) keeps large buffers out of the arenas:
bench/controlplane.py at 1 000 jobs with the simulated agents and the storm measured a peak of
272 MiB with it in a side run and 265 MiB in the published one, 293 and 298 MiB without (a
periodic `malloc_trim` gave the same 272 MiB, with work every few seconds instead of none). The
cost: each large buffer's pages are faulted in afresh (at 300 jobs, 40 000 more minor faults,
about 0.2 s of CPU)."""

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
