"""Liveness before the first step: an agent that falls silent in any start-up phase is a frozen
pod (restart without it, forced out), an epoch that never reaches its first step restarts whole,
and the start-up timeout adapts to the job's slowest earlier start."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from phalanx.models.assignment import AgentReport
from phalanx.models.heartbeat import Resume
from phalanx.models.job import TrainingJob
from phalanx.models.status import TrainingJobStatus
from phalanx.operator.planner import DeletePods, Observed, ObserveRecovery, PodView
from phalanx.operator.planner.startup import silence_timeout, startup_timeout
from tests.unit.planner.builders import T0, at, beat, job, pods, step


def st(j: TrainingJob) -> TrainingJobStatus:
    assert j.status is not None
    return j.status


def renewing(epoch: int, n: int, phase: str, renewed: datetime, **by_rank: Any) -> list[PodView]:
    """`n` node pods of `epoch` whose agents run it, last renewed at `renewed` in `phase`
    (`by_rank`: {"r2": (phase, renewed)} for one pod that differs)."""
    out = []
    for p in pods(epoch, n):
        own_phase, own_time = by_rank.get(f"r{p.rank}", (phase, renewed))
        report = AgentReport.model_validate(
            {
                "pod": p.name,
                "state": "running",
                "epoch": epoch,
                "time": T0,
                "phase": own_phase,
                "renewed": own_time,
            }
        )
        out.append(replace(p, agent=report))
    return out


def started(j: Any, epoch: int, n: int, when: float) -> Any:
    j, _ = step(j, Observed(pods=tuple(renewing(epoch, n, "rendezvous", at(when)))), at(when))
    assert st(j).phase == "Running"
    return j


@pytest.mark.parametrize("phase", ["starting", "rendezvous", "loading", "first-step", "untracked"])
def test_an_agent_silent_in_any_phase_is_a_frozen_pod_restarted_without_it(phase: str) -> None:
    j = job(failurePolicy={"hangTimeoutSeconds": 5})
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    alive = renewing(1, 4, phase, at(9), r3=(phase, at(3.5)))
    alive = renewing(1, 4, phase, at(13), r3=(phase, at(3.5)))
    j, plan = step(j, Observed(pods=tuple(alive)), at(13.4))
    assert st(j).epoch == 1, (
        "5 s have passed since pod 3's last renewal, but where the agents ping each other the "
        "rule waits 10 s: their word (PeerSilent) comes first, and this is the fallback"
    )
    assert plan.requeue_after == pytest.approx(0.1)
    j, plan = step(j, Observed(pods=tuple(alive)), at(13.6))
    assert st(j).epoch == 2
    [failure] = st(j).failures
    assert (failure.reason, failure.pod) == ("Hang", "j-1-3")
    assert f"phase {phase}" in (failure.message or "")
    assert st(j).nodes == 3, "the frozen machine is presumed lost (min 2, no spare)"
    assert "j-1-3" not in st(j).current.ranks, "a frozen pod is never carried over"
    assert DeletePods(("j-1-3",), force=True, reported=("j-1-3",)) in plan.actions
    assert any(e.reason == "Hang" for e in plan.events)


def test_agents_that_train_or_do_not_renew_are_never_judged_by_silence() -> None:
    j = job(failurePolicy={"hangTimeoutSeconds": 5})
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    training = renewing(1, 4, "training", at(2))
    j, _ = step(j, Observed(pods=tuple(training)), at(60))
    assert st(j).epoch == 1, "training pods stop renewing: their steps show they live"
    old_image = [replace(p, agent=p.agent.model_copy(update={"renewed": None})) for p in training]  # type: ignore[union-attr]
    old_image = [replace(p, agent=p.agent.model_copy(update={"phase": None})) for p in old_image]  # type: ignore[union-attr]
    j, _ = step(j, Observed(pods=tuple(old_image)), at(120))
    assert st(j).epoch == 1


def test_silence_timeout_is_15_s_or_a_shorter_hang_timeout() -> None:
    assert silence_timeout(None).seconds == 15
    assert silence_timeout(5).seconds == 5
    assert silence_timeout(600).seconds == 15, "a long step pause says nothing of the agent"


def test_an_epoch_stuck_before_its_first_step_restarts_whole_at_the_startup_timeout() -> None:
    j = job(failurePolicy={"startupTimeoutSeconds": 30})
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    stuck = renewing(1, 4, "loading", at(30.5), r1=("rendezvous", at(30.5)))
    j, plan = step(j, Observed(pods=tuple(stuck)), at(30))
    assert st(j).epoch == 1
    assert plan.requeue_after == pytest.approx(1.0)
    j, plan = step(j, Observed(pods=tuple(stuck)), at(31))
    assert st(j).epoch == 2
    [failure] = st(j).failures
    assert failure.reason == "StartupTimeout"
    assert "phases: rendezvous, loading" in (failure.message or "")
    assert st(j).nodes == 4, "every agent still answers: all carry over"


def test_a_program_without_phases_is_never_judged_by_the_startup_timeout() -> None:
    j = job(failurePolicy={"startupTimeoutSeconds": 30})
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    j, _ = step(j, Observed(pods=tuple(renewing(1, 4, "untracked", at(299)))), at(300))
    assert st(j).epoch == 1


def test_the_adaptive_startup_timeout_follows_the_slowest_earlier_start() -> None:
    assert startup_timeout(None, None).seconds == 120
    assert startup_timeout(None, 20).seconds == 120
    assert startup_timeout(None, 100).seconds == 300
    assert startup_timeout(45, 100).seconds == 45
    j = job()
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    j, _ = step(j, Observed(pods=tuple(renewing(1, 4, "training", at(12)))), at(12))
    running = renewing(1, 4, "training", at(12))
    j, _ = step(j, Observed(pods=tuple(running), heartbeat=beat(1, 1)), at(13.5))
    assert st(j).startup_seconds == pytest.approx(12.5)


def test_a_recovery_says_what_it_resumed_from_and_the_steps_redone() -> None:
    j = job()
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    trained = tuple(renewing(1, 4, "training", at(2)))
    j, _ = step(j, Observed(pods=trained, heartbeat=beat(1, 47)), at(20))
    lost = (*trained[:3], replace(trained[3], phase="Failed", exit_code=137))
    j, _ = step(j, Observed(pods=lost), at(21))
    assert st(j).epoch == 2
    resumed = beat(2, 41).model_copy(update={"resumed": Resume(step=40, source="memory")})
    ranks = st(j).current.ranks
    epoch2 = [
        replace(p, name=next((n for n, r in ranks.items() if r == p.rank), p.name), epoch=1)
        if p.rank in ranks.values() else p
        for p in renewing(2, st(j).nodes, "training", at(22))
    ]  # fmt: skip
    j, plan = step(j, Observed(pods=tuple(epoch2), heartbeat=resumed), at(25))
    [recovery] = plan.of_type(ObserveRecovery)
    assert (recovery.resumed and recovery.resumed.step, recovery.redone_steps) == (40, 7)
    [event] = [e for e in plan.events if e.reason == "Recovered"]
    assert "resumed from step 40 (memory), at least 7 steps redone" in event.message


def test_a_pod_is_silent_only_after_three_missed_renewals_however_short_the_timeout() -> None:
    j = job(failurePolicy={"hangTimeoutSeconds": 1})
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    slow = [
        replace(p, agent=p.agent.model_copy(update={"renew_seconds": 5.0}))  # type: ignore[union-attr]
        for p in renewing(1, 4, "untracked", at(10))
    ]
    j, _ = step(j, Observed(pods=tuple(slow)), at(24.9))
    assert st(j).epoch == 1, "an agent that renews every 5 s has 15 s (past the peers' 10 s)"
    j, _ = step(j, Observed(pods=tuple(slow)), at(25.1))
    assert st(j).epoch == 2
