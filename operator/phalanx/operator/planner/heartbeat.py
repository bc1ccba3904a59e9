"""Reading the heartbeat: progress, hangs and stragglers.

A hang is a step that does not advance for hangTimeoutSeconds, measured on the operator's clock
from when it last saw the step change (from the epoch's first reported step on). A straggler is a
rank whose mean step time over the agent's window stays above stragglerFactor x the median of the
others.
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta

from phalanx.models.heartbeat import Heartbeat
from phalanx.models.status import TrainingJobStatus


def advanced(status: TrainingJobStatus, heartbeat: Heartbeat | None) -> bool:
    """Whether the heartbeat shows a step of the current epoch that status has not recorded."""
    if heartbeat is None or heartbeat.epoch != status.epoch:
        return False
    progress = status.progress
    return progress is None or progress.epoch != heartbeat.epoch or progress.step != heartbeat.step


def hang_deadline(status: TrainingJobStatus, hang_timeout_seconds: int) -> datetime | None:
    """When the current epoch counts as hung if its step does not move; None until the epoch
    reports its first step.

    Start-up (imports, rendezvous, the first step's compilation or data loading) is not a step:
    a rank that never arrives is caught by the trainer's rendezvous and preflight timeouts, which
    exit 75/76 naming it. Counting start-up here would restart healthy jobs that start slowly.
    """
    progress = status.progress
    if progress is None or progress.epoch != status.epoch or progress.updated_at is None:
        return None
    return progress.updated_at + timedelta(seconds=hang_timeout_seconds)


def straggler_ranks(heartbeat: Heartbeat, factor: float, min_window: int) -> list[int]:
    """Global ranks whose windowed step time exceeds factor x the median of the other ranks.

    The median leaves the rank itself out, so that with two ranks the slow one still stands out.
    """
    times = heartbeat.rank_step_seconds
    if heartbeat.window_steps < min_window or len(times) < 2:
        return []
    slow = []
    for rank, seconds in enumerate(times):
        median = statistics.median(times[:rank] + times[rank + 1 :])
        if median > 0 and seconds > factor * median:
            slow.append(rank)
    return slow
