"""Cap glibc's malloc arenas for the operator process.

glibc gives a thread that allocates while others hold the arenas an arena of its own, up to 8 per
core, and returns little of an arena's free space to the system. The operator runs
`api_workers` threads (64 by default) that decode API responses, so part of its resident memory
is that free space, spread over arenas. Capping the arenas (what `MALLOC_ARENA_MAX` does, set
here so that any way of starting the operator gets it) trades a little lock contention, under a
GIL that serialises most allocations anyway, for a smaller process: bench/controlplane.py at
1 000 jobs measured 259 and 261 MiB peak with the cap of 2, 270 and 277 MiB without."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
"""mallopt's parameter for the arena cap (glibc's malloc.h)."""


def cap_arenas(arenas: int) -> bool:
    """Allow at most `arenas` malloc arenas from now on (0: glibc's default). Call it before
    starting threads: a thread keeps the arena it first allocated from. False where the C
    library is not glibc (musl has no arenas to cap) or refuses the value."""
    if arenas == 0:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    accepted = bool(mallopt(M_ARENA_MAX, arenas))
    if not accepted:
        log.warning("the C library refused a cap of %d malloc arenas", arenas)
    return accepted
