"""Reading the heartbeat: progress, hangs and stragglers.

A hang is a step that does not advance for the hang timeout, measured on the operator's clock from
when it last saw the step change (from the epoch's first reported step on). The timeout is
hangTimeoutSeconds when the user sets it; otherwise it adapts to the job (`hang_timeout`). A
straggler is a rank whose median compute time over the trainer's window (its own work, not its
waits for peers) stays above stragglerFactor x the median of the others, by at least a tenth of a
step (`PlannerConfig.straggler_min_cost`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from phalanx.models.heartbeat import Heartbeat
from phalanx.models.status import TrainingJobStatus

HANG_FLOOR_SECONDS = 30.0
"""The shortest adaptive hang timeout, and the one used until a step time is known.

It absorbs what does not scale with the step time: the agent's heartbeat period (2 s) and the
Lease's way to the operator, and the pauses between steps that are not steps (an asynchronous
checkpoint's staging, a data-epoch boundary, logging). It stays well under the trainer's
steady-state collective timeout (300 s) and NCCL's (600 s), so the operator, not a collective,
finds a stalled step. Jobs that pause longer between steps (blocking checkpoint saves, evaluation)
set hangTimeoutSeconds, and so do jobs whose steps take longer than the floor: the trainer first
reports step times at its first gather (every 10th step), and until then the floor applies.
"""

HANG_STEP_FACTOR = 10.0
"""An adaptive hang is a step that takes this many times the slowest rank's mean step time.

Normal steps vary within a few times the mean (data loading, GC, the step that stages a
checkpoint); a rank that stays slower is the straggler check's business (stragglerFactor, 2 by
default). 10x also holds after a restart at a smaller size, when each rank does more of the batch
and the step time of the previous epoch (the estimate until the new one reports) is too short.
"""


def advanced(status: TrainingJobStatus, heartbeat: Heartbeat | None) -> bool:
    """Whether the heartbeat shows a step of the current epoch that status has not recorded."""
    if heartbeat is None or heartbeat.epoch != status.epoch:
        return False
    progress = status.progress
    return progress is None or progress.epoch != heartbeat.epoch or progress.step != heartbeat.step


def slowest_step_seconds(heartbeat: Heartbeat) -> float | None:
    """The slowest rank's mean step time over the heartbeat's window; None without a window.

    The trainer gathers the ranks' step times only every few steps, so most heartbeats carry none:
    `Progress.stepSeconds` keeps the last one seen.
    """
    times = [t for t in heartbeat.rank_step_seconds if math.isfinite(t) and t > 0]
    if heartbeat.window_steps < 1 or not times:
        return None
    return max(times)


@dataclass(frozen=True)
class Timeout:
    """A timeout and why it has that value (for the event that reports it)."""

    seconds: float
    why: str


def adaptive_timeout(
    user: int | None, field: str, observed: float | None, floor: float, factor: float,
    what: str, unknown: str,
) -> Timeout:  # fmt: skip
    """The user's value of `field` if set; else max(floor, factor x the `observed` seconds of
    `what`), and the floor while none was observed (`unknown` says so)."""
    if user is not None:
        return Timeout(user, f"{user} s: {field}")
    if observed is None:
        return Timeout(floor, f"{floor:.0f} s: adaptive floor, {unknown}")
    seconds = max(floor, factor * observed)
    return Timeout(
        seconds,
        f"{seconds:.0f} s: adaptive, {factor:.0f} x {observed:.3g} s {what}, floor {floor:.0f} s",
    )


def hang_timeout(hang_timeout_seconds: int | None, step_seconds: float | None) -> Timeout:
    """The user's hangTimeoutSeconds if set; else max(floor, factor x the observed step time),
    and the floor while no step time is known."""
    return adaptive_timeout(
        hang_timeout_seconds, "hangTimeoutSeconds", step_seconds, HANG_FLOOR_SECONDS,
        HANG_STEP_FACTOR, "step time", "no step time yet",
    )  # fmt: skip


UNHEARD_SECONDS = 4.0
"""Rank 0's agent renews the heartbeat Lease every heartbeat period (2 s on a cluster) whether
or not the step moved: with no renewal for this long before a hang's deadline (two periods, for
the agents' and the operator's clocks), nothing says the job hangs; the channel between them is
down (an API server away), and the deadline waits for the next renewal."""


def unheard_at(renewed: datetime | None, due: datetime) -> bool:
    """Whether the heartbeat Lease went unrenewed up to the hang deadline `due` (False where
    no renewal time is known: the local backend, whose channel is files)."""
    return renewed is not None and renewed < due - timedelta(seconds=UNHEARD_SECONDS)


def hang_deadline(status: TrainingJobStatus, timeout_seconds: float) -> datetime | None:
    """When the current epoch counts as hung if its step does not move for `timeout_seconds` (see
    `hang_timeout`); None until the epoch reports its first step.

    Start-up (imports, rendezvous, the first step's compilation or data loading) is not a step,
    and counting it here would restart healthy jobs that start slowly: `startup` watches that
    window (agents that fall silent, an epoch whose first step does not come).
    """
    progress = status.progress
    if progress is None or progress.epoch != status.epoch or progress.updated_at is None:
        return None
    return progress.updated_at + timedelta(seconds=timeout_seconds)


SAVE_FLOOR_SECONDS = 120.0
"""A blocking checkpoint save may hold the step this long, or longer (`SAVE_FACTOR`), before
the hang timeout counts from its start."""
SAVE_FACTOR = 3.0
"""A blocking save may take this many times the program's last save (start to commit, an async
upload included: what a save of this state takes on this storage)."""


def save_deadline(
    heartbeat: Heartbeat | None, epoch: int, timeout_seconds: float
) -> datetime | None:
    """When a blocking save the current epoch reports (`saving`) counts as hung: from its start,
    the longest of the hang timeout, `SAVE_FLOOR_SECONDS` and `SAVE_FACTOR` x the last save's
    time; with no save blocking, the hang timeout from the last one's end (`savedAt`). Why: the
    final save or one waiting for the previous upload holds the step for as long as storage
    takes, which is no hang; a save that never ends is; and what follows a save (the program's
    exit, its next step) gets a whole timeout, not what the save left of the step's."""
    if heartbeat is None or heartbeat.epoch != epoch:
        return None
    if heartbeat.saving is None:  # the timeout counts again from the last save's end
        ended = heartbeat.saved_at
        return None if ended is None else ended + timedelta(seconds=timeout_seconds)
    allowed = max(timeout_seconds, SAVE_FLOOR_SECONDS, SAVE_FACTOR * (heartbeat.save_seconds or 0))
    return heartbeat.saving.since + timedelta(seconds=allowed)


def straggler_ranks(
    heartbeat: Heartbeat, factor: float, min_window: int, min_cost: float = 0.0
) -> list[int]:
    """Global ranks whose windowed compute time exceeds factor x the median of the other ranks,
    by at least `min_cost` of the step time (when the heartbeat has step times).

    Compute time, not step time: in synchronous training every rank waits for the slowest at
    each step, so step times come out alike and a slow rank hides among them; the time a rank
    spends on its own work does not. Step times are the fallback for a program that does not
    time its compute (they still show a rank that is slow between steps). The median leaves the
    rank itself out, so that with two ranks the slow one still stands out.
    """
    times = heartbeat.rank_compute_seconds or heartbeat.rank_step_seconds
    if heartbeat.window_steps < min_window or len(times) < 2:
        return []
    steps = [t for t in heartbeat.rank_step_seconds if t > 0]
    least = min_cost * statistics.median(steps) if steps else 0.0
    slow = []
    for rank, seconds in enumerate(times):
        median = statistics.median(times[:rank] + times[rank + 1 :])
        if median > 0 and seconds > factor * median and seconds - median >= least:
            slow.append(rank)
    return slow
