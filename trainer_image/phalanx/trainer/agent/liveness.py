"""The agent's renewals: "alive, in this phase" every period until its workers train.

Why until they train: before an epoch's first step, nothing else shows that a pod is alive (rank
0's heartbeat carries steps, and there are none yet), so a pod frozen while importing, joining
the process group or loading a checkpoint would leave its peers waiting in a collective. Once
the workers train, every step needs every rank, so rank 0's steps are the proof and the renewals
stop (no steady write load on the API server). A program that reports no phases (a third-party
script) is `untracked`: its agent renews for as long as it runs, its only sign of life, every
5 s at least.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from phalanx.models.assignment import PHASES, AgentPhase
from phalanx.trainer import phases

REFERENCE_MODULE = "phalanx.trainer.train"
UNTRACKED_RENEW_SECONDS = 5.0
"""How often an agent renews while its program reports no phases: for as long as it runs, so
less often than during a start-up (on a cluster each renewal is a write to the API server)."""


def tracks_phases(argv: list[str]) -> bool:
    """Whether the command writes phase files: the reference trainer does."""
    return REFERENCE_MODULE in argv


@dataclass
class Liveness:
    """One epoch's renewals on this pod."""

    phase_files: list[Path]
    tracked: bool
    period: float
    phase: AgentPhase | None = None
    """The phase last reported; None before the first report (due at once)."""
    clock: Callable[[], float] = time.monotonic
    _last: float = 0.0

    def current(self) -> AgentPhase:
        """The least advanced phase of the workers (one that wrote none is `starting`)."""
        if not self.tracked:
            return "untracked"
        seen = [phases.read(path) for path in self.phase_files]
        order = [PHASES.index(p) if p in PHASES else 0 for p in seen]
        return PHASES[min(order, default=0)]

    @property
    def renew_seconds(self) -> float:
        return self.period if self.tracked else max(self.period, UNTRACKED_RENEW_SECONDS)

    def due(self) -> AgentPhase | None:
        """The phase to report now: at once when it changed, else every `period` until the
        workers train; None when there is nothing to say."""
        if self.phase == "training":
            return None
        phase = self.current()
        now = self.clock()
        if phase == self.phase and now - self._last < self.renew_seconds:
            return None
        self.phase, self._last = phase, now
        return phase
