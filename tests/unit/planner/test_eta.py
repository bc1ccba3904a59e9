"""The job's ETA in its status: the steps left at the slowest rank's step time (synchronous
training runs at its pace), else at rank 0's own; none without a total or a step time."""

from __future__ import annotations

from datetime import timedelta

from phalanx.models.status import Progress
from phalanx.operator.planner import Observed
from tests.unit.planner.builders import at, beat, launched, pods, step


def progress_after(*beats: tuple[float, dict[str, object]]) -> Progress:
    j = launched()
    running = tuple(pods(1, 4))
    for seconds, fields in beats:
        fields = dict(fields)
        step_number = fields.pop("step")
        assert isinstance(step_number, int)
        j, _ = step(
            j, Observed(pods=running, heartbeat=beat(1, step_number, **fields)), at(seconds)
        )
    assert j.status is not None
    assert j.status.progress is not None
    return j.status.progress


def test_the_eta_is_the_steps_left_at_the_slowest_ranks_step_time() -> None:
    slowest = {"rank_step_seconds": [0.5, 0.8], "window_steps": 20, "step_seconds": 0.5}
    progress = progress_after((12, {"step": 100, "total_steps": 1100, **slowest}))
    assert progress.total_steps == 1100
    assert progress.eta == at(12) + timedelta(seconds=1000 * 0.8)


def test_a_heartbeat_without_rank_times_keeps_the_last_and_moves_the_eta() -> None:
    first = {"step": 100, "total_steps": 1100, "rank_step_seconds": [0.8], "window_steps": 20}
    progress = progress_after((12, first), (20, {"step": 110, "total_steps": 1100}))
    assert progress.eta == at(20) + timedelta(seconds=990 * 0.8)


def test_rank_0s_own_step_time_serves_a_program_that_gathers_none() -> None:
    progress = progress_after((12, {"step": 10, "total_steps": 30, "step_seconds": 2.0}))
    assert progress.eta == at(12) + timedelta(seconds=40)
    assert progress.step_seconds is None, "the hang timeout still waits for every rank's time"


def test_no_eta_without_a_total_or_a_step_time() -> None:
    assert progress_after((12, {"step": 10, "step_seconds": 2.0})).eta is None
    assert progress_after((12, {"step": 10, "total_steps": 30})).eta is None
