"""A job's reconciles are paced by their own cost (`loops.pace_seconds`): a large job's loop
rests as long as its last reconcile's own work took, a small job's not at all."""

from __future__ import annotations

from phalanx.operator.loops import PACE_FLOOR_SECONDS, pace_seconds


def test_a_small_jobs_reconcile_is_not_paced() -> None:
    assert pace_seconds(0.004, 30.0) == 0.0
    assert pace_seconds(PACE_FLOOR_SECONDS, 30.0) == 0.0


def test_a_large_jobs_loop_rests_as_long_as_its_reconcile_took() -> None:
    assert pace_seconds(0.25, 30.0) == 0.25


def test_the_rest_never_passes_the_planners_own_deadline() -> None:
    assert pace_seconds(0.25, 0.1) == 0.1
    assert pace_seconds(0.25, 0.0) == 0.0, "a reconcile due at once is not held"
