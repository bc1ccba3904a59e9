"""Frozen and stopping machines, scenario by scenario: a pod that a live peer's agent no longer
hears (PeerSilent) is left out of one restart, whichever signal comes first; a partition drops
one side; shorter timeouts wait for the peers' word; a pod stopped gracefully (preempted) is
waited for until the gang saved the step it reached."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.operator.planner import AssignEpoch, DeletePods, Observed, PodView
from phalanx.operator.planner.config import PlannerConfig
from tests.unit.planner.builders import at, beat, job, pods, step
from tests.unit.planner.inplace_builders import (
    agents,
    assigned,
    report,
    running,
    spare,
)


def silent(p: PodView, state: str = "running", **nodes: float) -> PodView:
    """`p` whose agent reports the node ranks `r<N>=seconds` silent."""
    heard = {int(k[1:]): v for k, v in nodes.items()}
    return replace(p, agent=report(p.name, state, p.epoch, silentNodes=heard,
                                   **({"exitCode": 75, "failedAt": at(19.4)} if state == "failed" else {})))  # fmt: skip


def test_a_silent_peer_is_one_restart_without_it_and_the_spare_takes_its_rank() -> None:
    """A frozen machine mid-training: node rank 0's agent no longer hears node rank 1's pings.
    The job restarts once, at once, and the silent pod never rejoins (deleted, not assigned)."""
    j = running(job(spares=1), extra=(spare(0),))
    gang = agents(1, 4)
    gang[0] = silent(gang[0], r1=4.2)
    j, plan = step(j, Observed(pods=(*gang, spare(0))), at(30))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 4)
    assert assigned(plan) == {"j-1-0": 0, "j-standby-1-0": 1, "j-1-2": 2, "j-1-3": 3}
    assert [a.names for a in plan.of_type(DeletePods)] == [("j-1-1",)]
    assert [(f.reason, f.pod) for f in j.status.failures] == [("PeerSilent", "j-1-1")]
    assert "not heard node rank 1's for 4.2 s" in (j.status.failures[0].message or "")
    assert (j.status.restarts.infrastructure, j.status.restarts.application) == (1, 0)
    assert [e.reason for e in plan.events].count("Restart") == 1


def test_a_silent_rank_0_is_found_by_the_ranks_that_hear_its_answers() -> None:
    j = running()
    gang = agents(1, 4)
    gang[1] = silent(gang[1], r0=4.0)
    gang[2] = silent(gang[2], r0=4.1)
    j, plan = step(j, Observed(pods=tuple(gang)), at(30))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3), "no spare: the job closes ranks"
    assert "j-1-0" not in assigned(plan)
    assert [(f.reason, f.pod) for f in j.status.failures] == [("PeerSilent", "j-1-0")]


def test_a_partition_between_two_agents_drops_the_one_more_peers_call_silent() -> None:
    """Rank 0 and rank 1 cannot hear each other; rank 2 still hears rank 0: rank 1 goes."""
    j = running()
    gang = agents(1, 4)
    gang[0] = silent(gang[0], r1=4.0)
    gang[1] = silent(gang[1], r0=4.0)
    j, plan = step(j, Observed(pods=tuple(gang)), at(30))
    assert j.status is not None
    assert [(f.reason, f.pod) for f in j.status.failures] == [("PeerSilent", "j-1-1")]
    assert sorted(assigned(plan)) == ["j-1-0", "j-1-2", "j-1-3"]


def test_a_silence_said_in_an_earlier_epoch_is_not_acted_on() -> None:
    j = running()
    gang = agents(1, 4, running_epoch=1)
    gang[0] = replace(gang[0], agent=report("j-1-0", "running", 0, silentNodes={1: 9.0}))
    j, plan = step(j, Observed(pods=tuple(gang)), at(30))
    assert j.status is not None
    assert j.status.epoch == 1
    assert not plan.of_type(AssignEpoch)


def collective_failure(p: PodView) -> PodView:
    """`p` whose agent reports its workers' collective failure at t=19.4."""
    return replace(p, agent=report(p.name, "failed", p.epoch, exitCode=75, message="Gloo reset",
                                   failedAt=at(19.4)))  # fmt: skip


def test_a_lost_machine_costs_one_restart_whichever_signal_comes_first() -> None:
    """The peers' collectives fail at once when a machine goes (exit 75); the lost pod's agent
    says nothing. The planner waits for the peer watch's word rather than restarting with the
    lost pod carried over (and again when it does not answer): one restart, one failure."""
    j = running()
    gang = [collective_failure(p) for p in agents(1, 4)]
    gang[1] = replace(agents(1, 4)[1])  # lost: its last report still says running
    j, plan = step(j, Observed(pods=tuple(gang)), at(19.6))
    assert j.status is not None
    assert j.status.epoch == 1, "the peers' collective failure waits for a silent peer"
    assert plan.requeue_after is not None
    assert plan.requeue_after <= PlannerConfig().silence_settle_seconds
    gang[0] = silent(gang[0], "failed", r1=4.1)
    j, plan = step(j, Observed(pods=tuple(gang)), at(23.6))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3)
    assert "j-1-1" not in assigned(plan)
    assert [(f.reason, f.pod) for f in j.status.failures] == [("PeerSilent", "j-1-1")]
    acked = tuple(replace(p, agent=report(p.name, "running", 2)) for p in gang if p.rank != 1)
    j, plan = step(j, Observed(pods=acked), at(40))
    assert j.status is not None
    assert j.status.epoch == 2
    assert j.status.restarts.infrastructure == 1, "no second restart for the lost pod"


def test_without_a_silent_peer_the_collective_failure_restarts_when_the_wait_ends() -> None:
    j = running()
    gang = [collective_failure(p) for p in agents(1, 4)]
    gang[3] = agents(1, 4)[3]  # still training: a slow rank, not a lost one
    j, _ = step(j, Observed(pods=tuple(gang)), at(19.6))
    assert j.status is not None
    assert j.status.epoch == 1
    j, plan = step(j, Observed(pods=tuple(gang)), at(19.4 + PlannerConfig().silence_settle_seconds))
    assert j.status is not None
    assert j.status.epoch == 2
    assert assigned(plan) == {f"j-1-{r}": r for r in range(4)}, "every pod carries over"


@pytest.mark.parametrize(("watched", "found_at"), [(True, 28.0), (False, 25.0)])
def test_a_short_hang_timeout_waits_for_the_peers_word_where_they_watch(
    watched: bool, found_at: float
) -> None:
    """hangTimeoutSeconds 5: a stalled step is a Hang after 5 s, but where the pods' agents ping
    each other it waits until 8 s, past the time they take to name a frozen machine (which the
    restart must then leave out)."""
    j = running(job(failurePolicy={"hangTimeoutSeconds": 5}))
    gang = tuple(agents(1, 4)) if watched else tuple(pods(1, 4))
    j, _ = step(j, Observed(pods=gang, heartbeat=beat(1, 7)), at(20))
    j, _ = step(j, Observed(pods=gang, heartbeat=beat(1, 7)), at(found_at - 0.1))
    assert j.status is not None
    assert j.status.epoch == 1
    j, _ = step(j, Observed(pods=gang, heartbeat=beat(1, 7)), at(found_at))
    assert j.status is not None
    assert [f.reason for f in j.status.failures] == ["Hang"]
    if watched:
        assert "held to 8 s for the peers' watch" in (j.status.failures[0].message or "")


def test_a_preempted_pod_waits_for_the_gangs_checkpoint_then_restarts_once_without_it() -> None:
    """The scheduler preempts pod 2 (DisruptionTarget, then a graceful deletion): its agent
    passes SIGTERM on and every rank saves the step it reached and stops. Restarting at once
    would stop them before that save; the planner waits until the workers stopped (the pod's
    deadline at the latest), then restarts once, without the preempted pod."""
    j = running(job(replicas={"min": 2, "max": 3}), n=3)
    gang = agents(1, 3)
    preempted = replace(gang[2], disruption_reason="PreemptionByScheduler", deleting=True,
                        stop_deadline=at(50))  # fmt: skip
    j, plan = step(j, Observed(pods=(gang[0], gang[1], preempted)), at(20))
    assert j.status is not None
    assert j.status.epoch == 1, "the workers are saving the step they reached"
    assert plan.requeue_after == pytest.approx(30)
    saved = [replace(p, agent=report(p.name, "failed", 1, exitCode=77, failedAt=at(20.5)))
             for p in gang[:2]]  # fmt: skip
    j, plan = step(j, Observed(pods=(*saved, preempted)), at(20.6))
    assert j.status is not None
    assert j.status.epoch == 1, "the preempted pod's own workers still run"
    gone = replace(preempted, phase="Failed", exit_code=143)
    j, plan = step(j, Observed(pods=(*saved, gone)), at(21))
    assert j.status is not None
    assert j.status.epoch == 2
    assert "j-1-2" not in j.status.current.ranks, "a pod being stopped is never carried over"
    assert [(f.reason, f.pod) for f in j.status.failures] == [("PreemptionByScheduler", "j-1-2")]
    assert j.status.restarts.infrastructure == 1


def test_a_preempted_pods_wait_ends_at_its_deadline() -> None:
    j = running(job(replicas={"min": 2, "max": 3}), n=3)
    gang = agents(1, 3)
    preempted = replace(gang[2], disruption_reason="PreemptionByScheduler", stop_deadline=at(50))
    j, _ = step(j, Observed(pods=(gang[0], gang[1], preempted)), at(20))
    assert j.status is not None
    assert j.status.epoch == 1
    j, _ = step(j, Observed(pods=(gang[0], gang[1], preempted)), at(50))
    assert j.status is not None
    assert j.status.epoch == 2, "a program that ignores SIGTERM is not waited for past it"
