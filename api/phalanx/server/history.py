"""Each job's recent trajectory (epoch, world size, throughput, loss), sampled from the watch.

Why: a TrainingJob's status holds only *now*: the current epoch, world size and progress. A
timeline of how the job closed ranks, grew back and trained needs the past, and the watch
cache already sees every status change go by. Keeping a bounded series per job here costs no
extra request to the API server; the series starts when this service started watching
(`since`), and Kubernetes events fill in what came before it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

Key = tuple[str, str]
POINTS_PER_JOB = 2000
"""At a heartbeat every 10 s, 2 000 points are 5.5 hours; older points are dropped first."""


@dataclass(frozen=True, slots=True)
class Point:
    """The job at one moment, as its status said."""

    time: datetime
    phase: str | None
    epoch: int
    nodes: int
    world_size: int
    step: int | None
    samples_per_second: float | None
    loss: float | None

    def same_state(self, other: Point) -> bool:
        """Equal but for the time: a status write that changed nothing we plot."""
        return replace(other, time=self.time) == self


def point(job: Mapping[str, Any], now: datetime) -> Point:
    status = job.get("status") or {}
    progress = status.get("progress") or {}
    if progress.get("epoch") != status.get("epoch", 0):
        progress = {}  # the previous epoch's last heartbeat: this epoch has not trained yet
    return Point(
        time=now,
        phase=status.get("phase"),
        epoch=status.get("epoch", 0),
        nodes=status.get("nodes", 0),
        world_size=status.get("worldSize", 0),
        step=progress.get("step"),
        samples_per_second=progress.get("samplesPerSecond"),
        loss=progress.get("loss"),
    )


class JobHistory:
    """Bounded per-job series of `Point`s; thread-safe (the watch writes, requests read)."""

    def __init__(self, points_per_job: int = POINTS_PER_JOB) -> None:
        self.since = datetime.now(UTC)
        self._points_per_job = points_per_job
        self._series: dict[Key, deque[Point]] = {}
        self._lock = threading.Lock()

    def record(self, key: Key, job: Mapping[str, Any], now: datetime | None = None) -> None:
        """Append the job's state unless it equals the last point."""
        sample = point(job, now or datetime.now(UTC))
        with self._lock:
            series = self._series.setdefault(key, deque(maxlen=self._points_per_job))
            if not series or not series[-1].same_state(sample):
                series.append(sample)

    def forget(self, key: Key) -> None:
        with self._lock:
            self._series.pop(key, None)

    def keep_only(self, keys: set[Key]) -> None:
        """After a relist: drop the series of jobs that no longer exist."""
        with self._lock:
            for gone in self._series.keys() - keys:
                del self._series[gone]

    def points(self, key: Key) -> list[Point]:
        with self._lock:
            return list(self._series.get(key, ()))
