"""The agent's renewals: "alive, in this phase" every period until its workers train.

Why until they train: before an epoch's first step, nothing else shows that a pod is alive (rank
0's heartbeat carries steps, and there are none yet), so a pod frozen while importing, joining
the process group or loading a checkpoint would leave its peers waiting in a collective. Once
the workers train, every step needs every rank, so rank 0's steps are the proof and the renewals
stop (no steady write load on the API server). A program that reports no phases (a third-party
script) is `untracked`: its agent renews for as long as it runs, its only sign of life.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.models.assignment import PHASES, AgentPhase
from phalanx.trainer import phases

REFERENCE_MODULE = "phalanx.trainer.train"


def tracks_phases(argv: list[str]) -> bool:
    """Whether the command writes phase files: the reference trainer does."""
    return REFERENCE_MODULE in argv


@dataclass
class Liveness:
    """One epoch's renewals on this pod."""

    phase_files: list[Path]
    tracked: bool
    period: float
    phase: AgentPhase = "starting"
    _last: float = field(default_factory=time.monotonic)

    def current(self) -> AgentPhase:
        """The least advanced phase of the workers (one that wrote none is `starting`)."""
        if not self.tracked:
            return "untracked"
        seen = [phases.read(path) for path in self.phase_files]
        order = [PHASES.index(p) if p in PHASES else 0 for p in seen]
        return PHASES[min(order, default=0)]

    def due(self) -> AgentPhase | None:
        """The phase to report now: at once when it changed, else every `period` until the
        workers train; None when there is nothing to say."""
        if self.phase == "training":
            return None
        phase = self.current()
        now = time.monotonic()
        if phase == self.phase and now - self._last < self.period:
            return None
        self.phase, self._last = phase, now
        return phase
