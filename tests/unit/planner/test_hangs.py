"""Hangs, scenario by scenario: a step that stops moving restarts the gang within its timeout
(the user's, or adaptive to the slowest rank's step time, 30 s at least); an epoch that has not
stepped yet is starting, not hung; a still step is a hang only while rank 0's agent renews the
heartbeat Lease; a hang's recovery and lost time count from the step's last move."""

from __future__ import annotations

from phalanx.operator.planner import Observed, ObserveRecovery
from phalanx.operator.planner.actions import EmitEvent, Plan
from tests.unit.planner.builders import at, beat, events, job, launched, pods, step


def test_hang_restarts_within_the_timeout() -> None:
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(21))
    assert plan.requeue_after == 1
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(22))
    assert j.status is not None
    assert j.status.epoch == 2
    assert j.status.failures[-1].reason == "Hang"
    assert "Hang" in events(plan)


def test_a_still_step_is_a_hang_only_while_the_heartbeat_lease_is_renewed() -> None:
    """Rank 0's agent renews the heartbeat Lease every period whether or not the step moves. No
    renewal since before the deadline (the API server was away): no hang yet, whatever the step
    says; renewals that carry the same step: a hang."""
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5),
                            heartbeat_renewed=at(12)), at(12))  # fmt: skip
    unheard = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5), heartbeat_renewed=at(13))
    j, plan = step(j, unheard, at(30))
    assert j.status is not None
    assert j.status.epoch == 1, "an outage of the channel is not a hang"
    assert "Hang" not in events(plan)
    assert plan.requeue_after is not None
    heard = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5), heartbeat_renewed=at(29))
    j, plan = step(j, heard, at(31))
    assert j.status is not None
    assert j.status.epoch == 2
    assert "Hang" in events(plan)


def test_a_hangs_recovery_and_lost_time_count_from_the_last_step_seen() -> None:
    """A hung job stopped training when its step last moved (12 s), not when the timeout ran out
    (22 s): its recovery to the new epoch's first step (30 s) is 18 s, all of it lost."""
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(22))
    assert j.status is not None
    lost_before = j.status.lost_seconds
    j, _ = step(j, Observed(), at(23))
    j, plan = step(j, Observed(pods=tuple(pods(2, 4)), heartbeat=beat(2, 6)), at(30))
    [recovery] = plan.of_type(ObserveRecovery)
    assert recovery.seconds == 18
    assert j.status is not None
    assert j.status.lost_seconds - lost_before >= 18


def test_an_epoch_without_a_step_yet_is_starting_not_hung() -> None:
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(12))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4))), at(60))
    assert j.status is not None
    assert j.status.epoch == 1
    assert "Hang" not in events(plan)
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 1)), at(61))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 1)), at(71))
    assert j.status is not None
    assert j.status.epoch == 2
    assert "Hang" in events(plan)


def hang_message(plan: Plan) -> str:
    """The Hang event's message."""
    return next(e.message for e in plan.events if e.reason == "Hang")


def test_default_hang_timeout_is_the_floor_until_a_step_time_is_known() -> None:
    j = launched()
    running = tuple(pods(1, 4))
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 5)), at(12))
    assert plan.requeue_after == 30
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 5)), at(41))
    assert "Hang" not in events(plan)
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 5)), at(43))
    assert j.status is not None
    assert (j.status.epoch, j.status.failures[-1].reason) == (2, "Hang")
    assert hang_message(plan) == (
        "no progress for 31 s at step 5 (timeout 30 s: adaptive floor, no step time yet)"
    )
    assert j.status.failures[-1].message == hang_message(plan)


def test_default_hang_timeout_scales_with_the_slowest_ranks_step_time() -> None:
    """Most heartbeats carry no step times (the trainer gathers them every few steps): status
    keeps the last, also into the next epoch until that one reports its own."""
    j = launched()
    running = tuple(pods(1, 4))
    slow = beat(1, 10, rank_step_seconds=[4.0, 4.2, 3.9, 4.0], window_steps=20)
    j, _ = step(j, Observed(pods=running, heartbeat=slow), at(12))
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 11)), at(16))
    assert j.status is not None
    assert j.status.progress is not None
    assert j.status.progress.step_seconds == 4.2
    assert plan.requeue_after == 42
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 11)), at(57))
    assert "Hang" not in events(plan)
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 11)), at(58))
    assert hang_message(plan) == (
        "no progress for 42 s at step 11 (timeout 42 s: adaptive, 10 x 4.2 s step time, floor 30 s)"
    )
    j, _ = step(j, Observed(), at(59))
    j, plan = step(j, Observed(pods=tuple(pods(2, 4)), heartbeat=beat(2, 12)), at(70))
    assert plan.requeue_after == 42


def test_fast_steps_keep_the_floor() -> None:
    j = launched()
    fast = beat(1, 10, rank_step_seconds=[0.5, 0.6], window_steps=20)
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=fast), at(12))
    assert plan.requeue_after == 30
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=fast), at(42))
    assert "(timeout 30 s: adaptive, 10 x 0.6 s step time, floor 30 s)" in hang_message(plan)


def test_hang_timeout_set_by_the_user_wins_over_the_step_time() -> None:
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    slow = beat(1, 10, rank_step_seconds=[4.0, 4.2], window_steps=20)
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=slow), at(12))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=slow), at(22))
    assert j.status is not None
    assert j.status.epoch == 2
    assert hang_message(plan) == (
        "no progress for 10 s at step 10 (timeout 10 s: hangTimeoutSeconds)"
    )


def _saving(since: float, last_save: float | None = None) -> dict[str, object]:
    return {"saving": {"step": 5, "since": at(since)}, "save_seconds": last_save}


def test_a_blocking_save_holds_the_step_without_being_a_hang_until_it_overstays() -> None:
    """The final save (or one waiting for the last upload) holds the step as long as storage
    takes: no hang within the save's allowance (2 min at least, or 3 x the last save), counted
    from the save's start; a save that never ends is one, and its event says so."""
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    saving = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5, **_saving(13)))
    j, plan = step(j, saving, at(100))
    assert j.status is not None
    assert (j.status.epoch, events(plan)) == (1, []), "a save of 87 s is no hang"
    assert plan.requeue_after == 33, "looked at again when the save's allowance ends"
    j, plan = step(j, saving, at(134))
    assert j.status is not None
    assert j.status.epoch == 2
    [hang] = [a.event for a in plan.of_type(EmitEvent) if a.event.reason == "Hang"]
    assert "no progress for 122 s at step 5" in hang.message
    assert "a save of step 5 blocking for 121 s" in hang.message


def test_a_save_is_allowed_three_times_the_last_ones_time() -> None:
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    slow_storage = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5, **_saving(13, 100.0)))
    j, _ = step(j, slow_storage, at(300))
    assert j.status is not None
    assert j.status.epoch == 1, "the last save took 100 s: 300 s is allowed"
    j, _ = step(j, slow_storage, at(314))
    assert j.status is not None
    assert j.status.epoch == 2


def test_a_save_reported_by_an_older_epoch_allows_nothing() -> None:
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    stale = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(0, 5, **_saving(13)))
    j, _ = step(j, stale, at(23))
    assert j.status is not None
    assert j.status.epoch == 2


def test_the_hang_timeout_counts_again_from_a_saves_end() -> None:
    """A final save of 87 s ends at 100 s: the step stood still for 88 s, but the program's exit
    after it (a process group's teardown on a busy machine) gets the whole timeout from the save's
    end, not a hang at once (what CI saw: Hang, Restart, Recovered, Succeeded)."""
    j = launched(job(failurePolicy={"hangTimeoutSeconds": 10}))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5)), at(12))
    saved = Observed(pods=tuple(pods(1, 4)), heartbeat=beat(1, 5, saved_at=at(100)))
    j, plan = step(j, saved, at(101))
    assert j.status is not None
    assert (j.status.epoch, events(plan)) == (1, []), "the save ended 1 s ago"
    assert plan.requeue_after == 9, "looked at again when the timeout from the save's end ends"
    j, plan = step(j, saved, at(111))
    assert j.status is not None
    assert j.status.epoch == 2, "still nothing 11 s after the save: a hang"
