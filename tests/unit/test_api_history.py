"""The API service's per-job history: one point per change of what the page plots, bounded, and
a previous epoch's last heartbeat never shown as the new epoch's progress."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from harness.jobs import job_manifest
from phalanx.server.history import JobHistory

KEY = ("ns", "job")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(epoch: int, world_size: int, step: int | None = None, progress_epoch: int = 0) -> Any:
    status: dict[str, Any] = {"phase": "Running", "epoch": epoch, "worldSize": world_size}
    if step is not None:
        status["progress"] = {"epoch": progress_epoch or epoch, "step": step, "loss": 1.0}
    return job_manifest("job", namespace="ns", status=status)


def test_a_point_per_change_and_none_for_an_unchanged_status() -> None:
    history = JobHistory()
    for i, state in enumerate([job(1, 4), job(1, 4), job(1, 4, 10), job(1, 4, 10), job(2, 3)]):
        history.record(KEY, state, T0 + timedelta(seconds=i))
    points = history.points(KEY)
    assert [(p.epoch, p.world_size, p.step) for p in points] == [
        (1, 4, None),
        (1, 4, 10),
        (2, 3, None),
    ]
    assert [p.time for p in points] == [T0, T0 + timedelta(seconds=2), T0 + timedelta(seconds=4)]


def test_the_previous_epochs_progress_is_not_the_new_epochs() -> None:
    history = JobHistory()
    history.record(KEY, job(2, 3, step=50, progress_epoch=1), T0)
    (point,) = history.points(KEY)
    assert (point.epoch, point.step, point.loss) == (2, None, None)


def test_bounded_and_forgotten() -> None:
    history = JobHistory(points_per_job=3)
    for step in range(10):
        history.record(KEY, job(1, 4, step), T0 + timedelta(seconds=step))
    assert [p.step for p in history.points(KEY)] == [7, 8, 9]
    history.record(("ns", "other"), job(1, 2), T0)
    history.keep_only({("ns", "other")})
    assert history.points(KEY) == []
    history.forget(("ns", "other"))
    assert history.points(("ns", "other")) == []
