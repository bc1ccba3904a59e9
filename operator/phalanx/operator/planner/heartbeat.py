"""Reading the heartbeat: progress, hangs and stragglers.

A hang is a step that does not advance for hangTimeoutSeconds, measured on the operator's clock
from when it last saw the step change (or the epoch start running). A straggler is a rank whose
mean step time over the agent's window stays above stragglerFactor x the median of the others.
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
    """When the current epoch counts as hung if its step does not move; None before it runs."""
    baseline = status.current.running_time
    progress = status.progress
    if progress and progress.epoch == status.epoch and progress.updated_at:
        baseline = max(baseline, progress.updated_at) if baseline else progress.updated_at
    return baseline + timedelta(seconds=hang_timeout_seconds) if baseline else None


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
