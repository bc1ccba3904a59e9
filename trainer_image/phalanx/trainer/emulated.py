"""Emulated device work: what `--step-delay-seconds` stands for, a bigger model's compute.

Why not a plain sleep: a sleep is not slowed when its process gets less CPU (a throttled or
oversubscribed node, a CPU-bound launcher starved of cycles), so a slow node would train as fast
as the others and no straggler could show. This work advances only while its process runs: it
sleeps in short slices and counts each for at most its own length, so time spent stopped or
waiting for a CPU is not work done, as it would not be for real compute. It costs a wake-up
every slice, not a busy core, so the healthy ranks of a local run do not crowd each other out.
"""

from __future__ import annotations

import time

SLICE_SECONDS = 0.005
"""One slice of work: short against a CPU quota's period (CFS: 100 ms), so that a process held
for part of every period does proportionally less work in it, and no shorter than Python's
thread switch interval (5 ms), so that its wake-ups do not crowd the worker's other threads
(a snapshot's or a checkpoint's background write)."""


def work(seconds: float) -> None:
    """Do `seconds` of work, counting only the time this process was running."""
    done = 0.0
    while done < seconds:
        start = time.monotonic()
        time.sleep(min(SLICE_SECONDS, seconds - done))
        done += min(time.monotonic() - start, SLICE_SECONDS)
