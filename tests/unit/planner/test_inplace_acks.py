"""In-place restarts when an agent is late to start its epoch: when a carried-over pod counts as
unresponsive and is replaced (the ack timeout, the settle time among peers that answered, a busy
agent's longer deadline, a large job's acknowledgements still arriving), and what carries over
when the next epoch begins before every agent answered."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.operator.planner import (
    AssignEpoch,
    CreateNodePod,
    DeletePods,
    Observed,
    PodView,
)
from phalanx.operator.planner.config import PlannerConfig
from tests.unit.planner.builders import at, step
from tests.unit.planner.inplace_builders import (
    agents,
    assigned,
    failed_worker,
    report,
    restarted_by_a_collective_failure,
    running,
    spare,
    started_epoch_2,
)


def test_an_agent_that_does_not_take_its_new_epoch_is_replaced() -> None:
    config = PlannerConfig(assignment_ack_seconds=3, assignment_settle_seconds=10)
    j = running()
    gang = [failed_worker(p, 75, "Gloo timeout") for p in agents(1, 4)]
    j, _ = step(j, Observed(pods=tuple(gang)), at(20), config)
    frozen = [*agents(1, 3, running_epoch=2), gang[3]]  # rank 3's agent is stopped
    j, plan = step(j, Observed(pods=tuple(frozen)), at(22), config)
    assert j.status is not None
    assert j.status.epoch == 2
    j, plan = step(j, Observed(pods=tuple(frozen)), at(23.5), config)
    assert j.status is not None
    assert j.status.epoch == 3
    assert j.status.failures[-1].reason == "AgentUnresponsive"
    assert j.status.failures[-1].pod == "j-1-3"
    assert j.status.current.ranks == {f"j-1-{r}": r for r in range(3)}
    assert j.status.nodes == 3, "its machine is presumed gone: restart at what runs now"
    assert not plan.of_type(CreateNodePod), "no replacement that might never schedule"
    assert "j-1-3" in plan.of_type(DeletePods)[0].names


def test_pods_not_yet_heard_in_an_epoch_carry_over_into_the_next() -> None:
    """On a large job the acknowledgements of epoch 2 are still on their way when a worker
    fails in it: the pods whose agents have not yet started epoch 2 (not overdue) keep running
    into epoch 3 rather than being replaced."""
    j, gang = restarted_by_a_collective_failure(PlannerConfig())
    heard = agents(1, 2, running_epoch=2)
    heard[0] = replace(heard[0], agent=report(heard[0].name, "failed", 2, exitCode=137,
                                              message="worker rank 0 killed"))  # fmt: skip
    j, plan = step(j, Observed(pods=(*heard, *gang[2:])), at(21))
    assert j.status is not None
    assert j.status.epoch == 3
    assert j.status.current.ranks == {f"j-1-{r}": r for r in range(4)}
    assert not plan.of_type(CreateNodePod), "no pod replaced"
    assert not plan.of_type(DeletePods)


def test_no_pod_is_late_while_the_others_acknowledgements_still_arrive() -> None:
    """Past the ack timeout, an agent still silent is not replaced while its peers' starts keep
    coming in (a large job's fan-out under way); once they stop for the settle time, it is."""
    config = PlannerConfig(assignment_ack_seconds=10, assignment_settle_seconds=2)
    j, gang = restarted_by_a_collective_failure(config)  # epoch 2 began at t=20
    arriving = [*started_epoch_2(at(29.5), missing=3), gang[3]]
    j, plan = step(j, Observed(pods=tuple(arriving)), at(30.5), config)
    assert j.status is not None
    assert j.status.epoch == 2, "an acknowledgement came 1 s ago: the fan-out is under way"
    assert plan.requeue_after == 1.0
    j, plan = step(j, Observed(pods=tuple(arriving)), at(31.5), config)
    assert j.status is not None
    assert j.status.epoch == 3
    assert j.status.failures[-1].reason == "AgentUnresponsive"
    assert j.status.failures[-1].pod == "j-1-3"


def test_a_silent_agent_among_peers_that_answered_is_replaced_after_the_settle_time() -> None:
    """A lost node's peers report their collective's failure before the node turns NotReady:
    the restart carries the lost pod too, and its silence, while its peers all started the
    epoch within half a second, replaces it long before the ack deadline."""
    config = PlannerConfig(assignment_ack_seconds=10, assignment_settle_seconds=2)
    j = running()
    lost = agents(1, 4)[2]
    gang = [failed_worker(p, 75, "Gloo connection reset") for p in agents(1, 4)]
    gang[2] = lost  # its agent never reports: the machine is gone, the node still Ready
    j, _ = step(j, Observed(pods=(*gang, spare(0))), at(20), config)
    assert j.status is not None
    assert (j.status.epoch, j.status.current.ranks.get("j-1-2")) == (2, 2), "carried: it answered"
    answered = [
        replace(p, agent=report(p.name, "running", 2, time=at(20.4)))
        for p in agents(1, 4)
        if p.rank != 2
    ]
    waiting = (*answered, lost, spare(0))
    j, plan = step(j, Observed(pods=waiting), at(21), config)
    assert j.status is not None
    assert j.status.epoch == 2, "not before the settle time"
    assert plan.requeue_after == pytest.approx(1.0), "it looks again at the settle time"
    j, plan = step(j, Observed(pods=waiting), at(22), config)
    assert j.status is not None
    assert j.status.epoch == 3
    assert j.status.failures[-1].reason == "AgentUnresponsive"
    assert assigned(plan)["j-standby-1-0"] == 2, "the hot spare takes the silent pod's rank"


def test_a_slow_gang_gets_more_time_than_the_settle_floor() -> None:
    config = PlannerConfig(assignment_ack_seconds=10, assignment_settle_seconds=2)
    j, gang = restarted_by_a_collective_failure(config)
    slow = started_epoch_2(at(21.5), missing=3)
    j, plan = step(j, Observed(pods=(*slow, gang[3])), at(23), config)
    assert j.status is not None
    assert j.status.epoch == 2, "peers took 1.5 s: the silent one has until 3 x 1.5 s"
    assert plan.requeue_after == pytest.approx(1.5)


def test_a_busy_agent_that_reported_since_the_epoch_began_gets_the_ack_deadline() -> None:
    """Alive but slow (a loaded machine): a report after the epoch began, even of an older
    epoch, is not the silence of a lost node."""
    config = PlannerConfig(assignment_ack_seconds=10, assignment_settle_seconds=2)
    j, gang = restarted_by_a_collective_failure(config)
    answered = started_epoch_2(at(20.4), missing=3)
    busy = replace(gang[3], agent=report("j-1-3", "failed", 1, time=at(20.9)))
    j, plan = step(j, Observed(pods=(*answered, busy)), at(23), config)
    assert j.status is not None
    assert j.status.epoch == 2, "not replaced at the settle time: its agent is alive"
    assert plan.requeue_after == pytest.approx(7.0), "it has until the ack deadline"


def test_an_agent_still_renewing_an_older_epoch_is_busy_not_lost() -> None:
    """Its loop is blocked (the first fork of a cold fork server imports torch) while its
    renewals go on: alive, so it gets BUSY_ACK_FACTOR x the ack timeout, and once that passes
    it is replaced like any agent that does not take its epoch."""
    config = PlannerConfig(assignment_ack_seconds=3, assignment_settle_seconds=2)
    j, gang = restarted_by_a_collective_failure(config)
    answered = started_epoch_2(at(20.4), missing=3)

    def blocked(renewed: float) -> PodView:
        old = report("j-1-3", "running", 1, time=at(10), phase="starting", renewed=at(renewed))
        return replace(gang[3], agent=old)

    j, plan = step(j, Observed(pods=(*answered, blocked(29.5))), at(30), config)
    assert j.status is not None
    assert j.status.epoch == 2, "past the settle time and the ack timeout, but it renews"
    assert plan.requeue_after == pytest.approx(8.0), "it has until 6 x 3 s after the epoch began"
    j, _ = step(j, Observed(pods=(*answered, blocked(37.9))), at(38), config)
    assert j.status is not None
    assert j.status.epoch == 3
    assert j.status.failures[-1].reason == "AgentUnresponsive"


def test_the_ack_clock_starts_when_the_assignment_goes_out_after_the_backoff() -> None:
    """An application failure restarts after its backoff (5 s here): the carried-over agents learn
    of the epoch only then (it goes out once the backoff ends, every pod carried over), so none
    is unresponsive for not starting it before, however long the backoff; a lost node's pod that
    stays mute once it is out is replaced as usual."""
    config = PlannerConfig(  # the acks' waits < the backoff; no peer's word of a silence comes
        assignment_ack_seconds=3, assignment_settle_seconds=2, silence_settle_seconds=1
    )
    j = running()
    gang = list(agents(1, 4))
    gang[0] = replace(gang[0], agent=report("j-1-0", "failed", 1, exitCode=1,
                                            message="Connection closed by peer",
                                            failedAt=at(19.4)))  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(20.5), config)
    assert j.status is not None
    assert (j.status.epoch, j.status.restarts.application) == (2, 1)
    assert j.status.current.restart_after == at(25.5), "the first application failure backs off"
    j, plan = step(j, Observed(pods=tuple(gang)), at(25.4), config)
    assert j.status is not None
    assert j.status.epoch == 2, "no agent is late for an epoch not yet assigned"
    assert not plan.of_type(AssignEpoch)
    j, plan = step(j, Observed(pods=tuple(gang)), at(25.6), config)
    assert j.status is not None
    assert (j.status.epoch, [a.epoch for a in plan.of_type(AssignEpoch)]) == (2, [2])
    answered = [*agents(1, 3, running_epoch=2), gang[3]]  # rank 3's machine is gone
    j, _ = step(j, Observed(pods=tuple(answered)), at(26.0), config)
    assert j.status is not None
    assert j.status.epoch == 2, "within the settle time"
    j, _ = step(j, Observed(pods=tuple(answered)), at(28.0), config)
    assert j.status is not None
    assert j.status.epoch == 3
    assert [(f.reason, f.pod) for f in j.status.failures if f.epoch == 2] == [
        ("AgentUnresponsive", "j-1-3")
    ]
