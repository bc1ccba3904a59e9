"""When the next memory snapshot is due: every `memoryIntervalSteps` steps, or less often when
a snapshot costs more than `memoryOverheadPercent` of the training time between snapshots
(CheckFreq's idea, FAST '21: choose the frequency from the measured cost, so that checkpointing
stays within an overhead budget).

Why: a snapshot blocks the loop for its copy of the state into host memory, which grows with
the state while a step need not. Measured on this project's 2-core VM (bench/results/suite):
the toy's snapshot blocks 3 ms of 116 ms steps, 117.5 M parameters 128 ms of 842 ms steps, so
a fixed 10 steps costs 0.26 % and 1.5 % of step time; on a GPU the copy overlaps the next
forward and backward passes and costs less. One fixed interval cannot serve both; the cost
measured in the job can. Fewer snapshots mean more steps redone after a failure (on average
half the spacing), which is the trade the budget states.

What counts: the time a snapshot blocked training (the `maybe_save` call, and on a GPU the wait
of the next optimizer step for the copy), against the median of the recent steps. A snapshot
that wrote a slot for the first time in this process (the pages touched or mapped, once) is not
representative and leaves the spacing as it was. Spacings are whole multiples of
`memoryIntervalSteps`, so snapshots keep landing on the checkpoint steps they did, where a
checkpoint stages from them (`staging`).

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
    _blocked: float = field(default=0.0, init=False)
    _measured: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.spacing = self.interval_steps

    def due(self, step: int) -> bool:
        """Whether this rank would snapshot at `step` (asked after each step, by when the last
        snapshot's cost is whole)."""
        self._settle()
        return self.spacing > 0 and step % self.spacing == 0

    def step_took(self, seconds: float) -> None:
        self._steps.append(seconds)

    def snapshot_took(self, blocked: float, *, first_use: bool) -> None:
        """A snapshot blocked training `blocked` seconds so far (more may follow, `blocked_more`);
        `first_use`: it wrote a slot this process had not written before."""
        self._blocked, self._measured = blocked, not first_use

    def blocked_more(self, seconds: float) -> None:
        """The next optimizer step waited `seconds` for the last snapshot's copy (on a GPU)."""
        self._blocked += seconds

    def _settle(self) -> None:
        """The spacing from the last snapshot's cost, once."""
        if not self._measured or not self.overhead_percent or not self._steps:
            return
        budget = self.overhead_percent / 100 * statistics.median(self._steps)
        needed = math.ceil(self._blocked / budget) if budget > 0 else self.interval_steps
        self.spacing = self.interval_steps * max(1, math.ceil(needed / self.interval_steps))
        self._measured = False
