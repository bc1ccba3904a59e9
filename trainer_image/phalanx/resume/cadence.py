"""When the next memory snapshot is due: every `memoryIntervalSteps` steps, or less often when
a snapshot costs more than `memoryOverheadPercent` of the training time between snapshots
(CheckFreq's idea, FAST '21: choose the frequency from the measured cost, so that checkpointing
stays within an overhead budget).

Why: a snapshot blocks the loop for its copy of the state into host memory, which grows with
the state while a step need not: a fixed interval costs a small model almost nothing and a
large one several times more (docs/figures.md, "Snapshots"); on a GPU the copy overlaps the
next forward and backward passes and costs less. One fixed interval cannot serve both; the cost
measured in the job can. Fewer snapshots mean more steps redone after a failure (on average
half the spacing), which is the trade the budget states.

What counts: the time the snapshot blocked its own step, and what the next step took beyond the
median of the recent ones: on a GPU the optimizer step's wait for the copy, on any machine the
slowest rank's snapshot, which every rank waits for in the next collective (in the quickstart the
step after a snapshot took longer than the snapshot blocked its own rank). Not counted: a snapshot
that wrote a slot for the first time in this process (its pages touched or mapped, once), and one at
a checkpoint's step, which the checkpoint stages from instead of copying the state itself
(`staging`): its cost is the checkpoint's (`Resumable` takes one at every checkpoint step where the
snapshot can stand for the checkpoint). Spacings are whole multiples of `memoryIntervalSteps`, the
steps a user who set it expects snapshots at.

The ranks must snapshot the same steps (a snapshot is whole only when every rank's part is of
one step): each rank says whether one is due in the per-step agreement (`Resumable._agree`),
and all take one when any says so.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

RECENT_STEPS = 20
"""Steps whose median is the step time the budget is a share of."""


@dataclass
class SnapshotCadence:
    """One rank's view of the snapshot cadence."""

    interval_steps: int
    """The most frequent cadence (spec.checkpoint.memoryIntervalSteps); 0: no snapshots."""
    overhead_percent: int
    """The budget (spec.checkpoint.memoryOverheadPercent); 0: exactly every interval_steps."""
    spacing: int = field(init=False)
    """Steps between snapshots now: a multiple of interval_steps."""
    _steps: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS), init=False)
    _blocked: float | None = field(default=None, init=False)
    """A counted snapshot's own blocked time, until the step after it is known."""

    def __post_init__(self) -> None:
        self.spacing = self.interval_steps

    def due(self, step: int) -> bool:
        """Whether this rank would snapshot at `step`."""
        return self.spacing > 0 and step % self.spacing == 0

    def snapshot_took(self, blocked: float, *, counted: bool) -> None:
        """A snapshot blocked its step `blocked` seconds; `counted`: its cost is the cadence's
        (not a slot's first use, not a checkpoint's step)."""
        self._blocked = blocked if counted else None

    def step_took(self, seconds: float) -> None:
        """A step's time (its forward, backward and optimizer step; not the saves after it).
        The step after a counted snapshot settles the spacing."""
        if self._blocked is not None and self._steps:
            excess = max(0.0, seconds - statistics.median(self._steps))
            self._settle(self._blocked + excess)
        self._blocked = None
        self._steps.append(seconds)

    def _settle(self, cost: float) -> None:
        if not self.overhead_percent or self.interval_steps == 0:
            return
        budget = self.overhead_percent / 100 * statistics.median(self._steps)
        needed = math.ceil(cost / budget) if budget > 0 else self.interval_steps
        self.spacing = self.interval_steps * max(1, math.ceil(needed / self.interval_steps))
