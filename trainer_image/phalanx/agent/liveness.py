"""The agent's renewals: "alive, in this phase" every period until its workers train.

Why until they train: before an epoch's first step, nothing else shows that a pod is alive (rank
0's heartbeat carries steps, and there are none yet), so a pod frozen while importing, joining
the process group or loading a checkpoint would leave its peers waiting in a collective. Once
the workers train, every step needs every rank, so rank 0's steps are the proof and the renewals
stop (no steady write load on the API server). A program that reports no phases (a third-party
script) is `untracked`: its agent renews for as long as it runs, its only sign of life, every
5 s at least.

A script that uses `phalanx.progress` starts untracked and becomes tracked once every worker of
the pod entered a phase (`progress.report` enters `training`; `progress.phase` any other):
from then on it is judged as the reference trainer is, with renewals every period until all
train, and none after, its steps being the proof of life. Why every worker, not any: a script
may report from rank 0 alone; its other workers then never write a phase, and taking their
silence for `starting` would renew "starting" for as long as the epoch runs and show a
training pod as one that never started. Each epoch starts untracked again: its phase files
are new, and its workers have written nothing yet.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from phalanx import phases
from phalanx.models.vocabulary import PHASES, AgentPhase

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
        """The least advanced phase of the workers (one that wrote none is `starting`); for a
        program not known to report phases, `untracked` until every worker wrote one."""
        seen = [phases.read(path) for path in self.phase_files]
        if not self.tracked and (not seen or any(p not in PHASES for p in seen)):
            return "untracked"
        order = [PHASES.index(p) if p in PHASES else 0 for p in seen]
        return PHASES[min(order, default=0)]

    @property
    def renew_seconds(self) -> float:
        """Every period while phases are reported; less often while untracked (for as long as
        the program runs)."""
        untracked = self.phase == "untracked" or (not self.tracked and self.phase is None)
        return max(self.period, UNTRACKED_RENEW_SECONDS) if untracked else self.period

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


Publish = Callable[[int, AgentPhase, datetime, float, dict[str, int]], None]
"""Publishes a `running` report: epoch, phase, since, renew seconds, worker pids."""


@dataclass
class Renewals:
    """Renews the agent's report from a thread of its own, so that the renewals go on while the
    agent's loop is busy (the first fork of a cold fork server waits for torch's import, seconds
    on a loaded machine): a silent agent is then a frozen or dead process, never a busy one.
    Busy but stuck is the start-up timeout's business."""

    publish: Publish
    poll_seconds: float = 0.05
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _epoch: int = -1
    _liveness: Liveness | None = None
    _since: datetime | None = None
    _workers: dict[str, int] = field(default_factory=dict)
    _thread: threading.Thread | None = None

    def follow(self, epoch: int, liveness: Liveness, since: datetime) -> None:
        """Renew for `epoch` from now on (its first report goes out at once)."""
        with self._lock:
            self._epoch, self._liveness, self._since, self._workers = epoch, liveness, since, {}
            self._renew(force=False)
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="renewals", daemon=True)
            self._thread.start()

    def workers(self, workers: dict[str, int]) -> None:
        """The epoch's workers run: report their pids now."""
        with self._lock:
            self._workers = dict(workers)
            self._renew(force=True)

    def stop(self) -> None:
        """No more renewals (the epoch ended); returns once one in flight is out, so that what
        the agent reports next comes after it."""
        with self._lock:
            self._liveness = None

    def _loop(self) -> None:
        while True:
            time.sleep(self.poll_seconds)
            with self._lock:
                self._renew(force=False)

    def _renew(self, force: bool) -> None:
        live = self._liveness
        if live is None or self._since is None:
            return
        phase = live.due()
        if phase is None and force:
            phase = live.phase
        if phase is not None:
            self.publish(self._epoch, phase, self._since, live.renew_seconds, self._workers)
