"""In-place restarts, scenario by scenario: pods whose agent answers carry over into the new
epoch, hot spares take lost ranks, a lost node costs one restart, a frozen agent is replaced."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.operator.planner import (
    CreateNodePod,
    CreateStandbyPod,
    DeletePods,
    NodeView,
    Observed,
    ObserveRecovery,
    PodView,
)
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.observed import Heartbeat
from tests.unit.planner.builders import T0, at, beat, job, pods, step
from tests.unit.planner.inplace_builders import (
    agents,
    assigned,
    failed_worker,
    report,
    running,
    spare,
)


def test_a_killed_worker_restarts_every_pod_in_place() -> None:
    j = running()
    gang = agents(1, 4)
    gang[1] = failed_worker(gang[1], 137, "worker rank 2 killed by SIGKILL")
    for r in (0, 2, 3):
        gang[r] = failed_worker(gang[r], 75, "Gloo connection closed")
    j, plan = step(j, Observed(pods=tuple(gang)), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes, j.status.phase) == (2, 4, "Restarting")
    assert j.status.current.ranks == {f"j-1-{r}": r for r in range(4)}
    assert not plan.of_type(DeletePods)
    assert not plan.of_type(CreateNodePod)
    assert assigned(plan) == {f"j-1-{r}": r for r in range(4)}
    [restart] = [e.message for e in plan.events if e.reason == "Restart"]
    assert "Killed of j-1-1" in restart, "the root cause, not a peer's collective error"
    assert j.status.restarts.infrastructure == 1


def test_a_carried_pod_is_starting_until_its_agent_starts_the_epoch() -> None:
    j = running()
    gang = [failed_worker(p, 137, "killed") for p in agents(1, 4)]
    j, _ = step(j, Observed(pods=tuple(gang)), at(20))
    half = [*agents(1, 2, running_epoch=2), *gang[2:]]  # two agents took epoch 2, two not yet
    j, plan = step(j, Observed(pods=tuple(half), heartbeat=beat(2, 61)), at(21))
    assert j.status is not None
    assert j.status.phase == "Restarting"
    assert not plan.of_type(ObserveRecovery)
    assert not plan.of_type(CreateNodePod)
    j, plan = step(j, Observed(pods=tuple(agents(1, 4, 2)), heartbeat=beat(2, 61)), at(22))
    assert j.status is not None
    assert j.status.phase == "Running"
    [recovery] = plan.of_type(ObserveRecovery)
    assert recovery.seconds == 2.0


def test_a_lost_node_without_a_spare_is_one_restart_at_the_size_that_runs_now() -> None:
    j = running()
    gang = agents(1, 4)
    gang[3] = replace(gang[3], phase="Failed", exit_code=137, agent=None)
    nodes = {f"node-{r}": NodeView(f"node-{r}", r != 3) for r in range(4)}
    j, plan = step(j, Observed(pods=tuple(gang), nodes=nodes), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3)
    assert assigned(plan) == {f"j-1-{r}": r for r in range(3)}
    assert plan.of_type(DeletePods) == [DeletePods(("j-1-3",), force=True)], (
        "deleted at once by force: its node's kubelet would never confirm a graceful delete"
    )
    assert not plan.of_type(CreateNodePod)
    j, plan = step(j, Observed(pods=tuple(gang), nodes=nodes), at(20.5))
    assert DeletePods(("j-1-3",), force=True) in plan.actions, "not waited for: its node is gone"
    j, plan = step(j, Observed(pods=tuple(agents(1, 3, 2)), nodes=nodes), at(21))
    assert j.status is not None
    assert j.status.phase == "Running"
    j, plan = step(j, Observed(pods=tuple(agents(1, 3, 2)), nodes=nodes), at(400))
    assert [e.reason for e in plan.events] == [], "no second restart, no shrink"
    assert plan.of_type(CreateStandbyPod), "a standby waits for capacity to grow back"


def test_a_restart_whose_retired_pods_were_on_lost_nodes_launches_in_the_same_reconcile() -> None:
    """Nothing to wait for: the survivors carry over, the lost node's pod is deleted by force,
    so the replacement is created with the decision, not a reconcile later (under a storm that
    reconcile came 1-3 s after). A survivor that must stop gracefully is waited for first."""
    j = running(job(replicas={"min": 4, "max": 4}))
    gang = agents(1, 4)
    nodes = {f"node-{r}": NodeView(f"node-{r}", r != 3) for r in range(4)}
    after, plan = step(j, Observed(pods=tuple(gang), nodes=nodes), at(20))
    assert after.status is not None
    assert (after.status.epoch, after.status.nodes) == (2, 4)
    assert plan.of_type(DeletePods) == [DeletePods(("j-1-3",), True, ("j-1-3",))]
    assert [(a.epoch, a.rank) for a in plan.of_type(CreateNodePod)] == [(2, 3)]
    assert assigned(plan) == {**{f"j-1-{r}": r for r in range(3)}, "j-2-3": 3}

    mute = [*gang[:2], replace(gang[2], agent=None), gang[3]]  # no agent: it stops gracefully
    after, plan = step(j, Observed(pods=tuple(mute), nodes=nodes), at(20))
    assert after.status is not None
    assert (after.status.epoch, after.status.current.restart_after) == (2, None)
    assert DeletePods(("j-1-2",)) in plan.actions
    assert not plan.of_type(CreateNodePod), "created before a retired pod stopped"


def test_a_hot_spare_takes_the_lost_rank_and_the_pool_refills() -> None:
    j = running(job(spares=1), extra=(spare(0),))
    assert j.status is not None
    assert j.status.spares == 1
    gang = agents(1, 4)
    gang[1] = replace(gang[1], phase="Unknown", agent=None)  # its node stopped answering
    j, plan = step(j, Observed(pods=(*gang, spare(0))), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 4)
    ranks = {"j-1-0": 0, "j-standby-1-0": 1, "j-1-2": 2, "j-1-3": 3}
    assert assigned(plan) == ranks
    assert not plan.of_type(CreateNodePod)
    assert j.status.spares == 0
    serving = tuple(replace(p, agent=report(p.name, "running", 2)) for p in (*gang[::2], gang[3]))
    taken = replace(spare(0), agent=report("j-standby-1-0", "running", 2))
    j, plan = step(j, Observed(pods=(*serving, taken)), at(21))
    assert j.status is not None
    assert j.status.phase == "Running"
    assert [(a.epoch, a.index) for a in plan.of_type(CreateStandbyPod)] == [(2, 0)]


def test_a_new_pod_rendezvouses_at_a_carried_rank_0() -> None:
    j = running()
    gang = agents(1, 4)
    gang[3] = replace(gang[3], phase="Failed", exit_code=137, terminated_reason="OOMKilled")
    j, _ = step(j, Observed(pods=tuple(gang)), at(20))
    carried = tuple(agents(1, 3, running_epoch=2))
    j, plan = step(j, Observed(pods=carried), at(21))
    [created] = plan.of_type(CreateNodePod)
    assert (created.epoch, created.rank, created.master) == (2, 3, "j-1-0"), (
        "the new pod rendezvouses at the carried rank 0, not at a j-2-0 that does not exist"
    )


def test_pods_that_run_one_epoch_are_recreated_as_before() -> None:
    j = running()
    gang = pods(1, 4)
    gang[0] = replace(gang[0], phase="Failed", exit_code=1)
    j, plan = step(j, Observed(pods=tuple(gang)), at(20))
    assert j.status is not None
    assert j.status.current.ranks == {}
    assert plan.of_type(DeletePods)[0].names == tuple(f"j-1-{r}" for r in range(4))


def test_a_recovery_says_where_its_seconds_went_and_conditions_follow_it() -> None:
    j = running()
    gang = agents(1, 4)
    failed_at = at(19.5)
    gang[2] = replace(gang[2], agent=report("j-1-2", "failed", 1, exitCode=137, failedAt=failed_at))
    j, _ = step(j, Observed(pods=tuple(gang)), at(20))
    assert j.status is not None
    restarting = {c.type: c for c in j.status.conditions}["Restarting"]
    assert (restarting.status, restarting.reason) == ("True", "Killed")
    stamps = {"spawned": 20.3, "started": 20.35, "rendezvous": 20.8, "built": 20.9,
              "loaded": 21.4, "firstStep": 21.5}  # fmt: skip
    startup = {k: at(v).timestamp() for k, v in stamps.items()}
    heartbeat = beat(2, 61, startup=startup)
    j, plan = step(j, Observed(pods=tuple(agents(1, 4, 2)), heartbeat=heartbeat), at(22))
    [recovery] = plan.of_type(ObserveRecovery)
    assert recovery.seconds == 2.5, "from the failure the agent reported, not from the decision"
    assert dict(recovery.parts) == {
        "detect": 0.5, "assign": 0.3, "start": 0.05, "rendezvous": 0.45, "build": 0.1,
        "load": 0.5, "first step": 0.1, "report": 0.5,
    }  # fmt: skip
    [message] = [e.message for e in plan.events if e.reason == "Recovered"]
    assert message.startswith("epoch 2 trains again 2.50 s after the failure (detect 0.50 s, ")
    assert j.status is not None
    assert {c.type: c.status for c in j.status.conditions}["Restarting"] == "False"
    assert j.status.failed_at is None


def test_spares_are_warm_once_the_jobs_pods_proved_they_run_the_agent() -> None:
    """Only a pod that runs phalanx-agent may stand by as the template: any other program would
    start training with a rank nobody gave it. A report from the job's own pods is the proof."""
    j = job(spares=1)
    j, _ = step(j, Observed(), at(0))
    one_epoch = tuple(pods(1, 4))  # a plain torchrun template: no agent reports
    j, plan = step(j, Observed(pods=one_epoch), at(5))
    assert [a.warm for a in plan.of_type(CreateStandbyPod)] == [False]
    cold = PodView(name="j-standby-1-0", epoch=1, rank=0, role="standby", phase="Running",
                   node_name="spare-node", created=T0)  # fmt: skip
    reporting = tuple(agents(1, 4))
    j, plan = step(j, Observed(pods=(*reporting, cold)), at(6))
    [deleted] = plan.of_type(DeletePods)
    assert "j-standby-1-0" in deleted.names, "a cold standby made before the first report goes"
    j, plan = step(j, Observed(pods=reporting), at(7))
    assert [a.warm for a in plan.of_type(CreateStandbyPod)] == [True]
    warm = replace(cold, warm=True, agent=report("j-standby-1-0", "standby", 0))
    j, plan = step(j, Observed(pods=(*reporting, warm)), at(8))
    assert not plan.of_type(DeletePods)
    assert not plan.of_type(CreateStandbyPod)
    assert j.status is not None
    assert j.status.spares == 1


def _slow_rank_4() -> Heartbeat:
    compute = [0.2] * 8
    compute[4] = 0.9  # node rank 2's first worker
    return beat(1, 50, rank_step_seconds=[1.0] * 8, rank_compute_seconds=compute, window_steps=20)


def test_a_straggler_restart_carries_over_every_pod_but_the_slow_nodes_at_once() -> None:
    """The pods on other nodes keep running into the new epoch at once, one node fewer (no wait
    for a replacement node that may not exist); a standby kept off the slow node grows it back
    when capacity shows."""
    j = running()
    j, plan = step(j, Observed(pods=tuple(agents(1, 4)), heartbeat=_slow_rank_4()), at(30))
    assert j.status is not None
    assert j.status.avoid_nodes == ["node-2"]
    assert (j.status.epoch, j.status.nodes) == (2, 3)
    assert assigned(plan) == {"j-1-0": 0, "j-1-1": 1, "j-1-3": 2}
    assert "j-1-2" in {name for a in plan.of_type(DeletePods) for name in a.names}
    assert not plan.of_type(CreateNodePod)
    assert [e.reason for e in plan.events] == ["Straggler", "Restart"]
    survivors = tuple(p for p in agents(1, 4, 2) if p.rank != 2)
    j, _ = step(j, Observed(pods=survivors), at(31))
    assert j.status is not None
    assert j.status.phase == "Running"
    j, plan = step(j, Observed(pods=survivors), at(32))
    assert {a.avoid_nodes for a in plan.of_type(CreateStandbyPod)} == {("node-2",)}


def test_a_hot_spare_takes_a_stragglers_rank_and_the_size_stays() -> None:
    j = running(job(spares=1), extra=(spare(0),))
    j, plan = step(j, Observed(pods=(*agents(1, 4), spare(0)), heartbeat=_slow_rank_4()), at(30))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 4)
    assert assigned(plan) == {"j-1-0": 0, "j-1-1": 1, "j-standby-1-0": 2, "j-1-3": 3}


def test_a_straggler_the_job_cannot_leave_without_going_below_min_is_kept_and_said() -> None:
    """At min, leaving the slow node would stop the job until a node appears that may never
    come: it trains on, slowly, and says so once."""
    j = running(job(replicas={"min": 4, "max": 4}))
    gang = tuple(agents(1, 4))
    j, plan = step(j, Observed(pods=gang, heartbeat=_slow_rank_4()), at(30))
    assert j.status is not None
    assert (j.status.epoch, j.status.avoid_nodes, j.status.failures) == (1, [], [])
    [event] = plan.events
    assert event.reason == "Straggler"
    assert "would leave 3 node pods, too few (min is 4): the job stays" in event.message
    slow_ranks = next(c for c in j.status.conditions if c.type == "SlowRanks")
    assert (slow_ranks.status, slow_ranks.reason) == ("True", "BelowMinimum")
    j, plan = step(j, Observed(pods=gang, heartbeat=_slow_rank_4()), at(31))
    assert j.status is not None
    assert not plan.events, "said once, not at every heartbeat"
    healthy = beat(1, 60, rank_step_seconds=[1.0] * 8, rank_compute_seconds=[0.2] * 8,
                   window_steps=20)  # fmt: skip
    j, _ = step(j, Observed(pods=gang, heartbeat=healthy), at(40))
    assert j.status is not None
    slow_ranks = next(c for c in j.status.conditions if c.type == "SlowRanks")
    assert (slow_ranks.status, slow_ranks.reason) == ("False", "NoSlowRanks")


@pytest.mark.parametrize(
    ("victim", "peers", "kept"),
    [
        ((137, "Killed"), (1, "Error"), ["Killed"]),  # a plain script's peers exit 1
        ((137, "Killed"), (75, "CollectiveFailure"), ["Killed"]),  # the reference trainer's
        ((1, "Error"), (1, "Error"), ["Error"]),  # a bug on one rank; the others fail after it
    ],
    ids=["killed-peers-error", "killed-peers-collective", "error-first-of-errors"],
)
def test_one_fault_is_one_failure_whatever_the_peers_exit_with(
    victim: tuple[int, str], peers: tuple[int, str], kept: list[str]
) -> None:
    """The fault of node rank 1 (its agent reported it first), then the other ranks' exits."""
    j = running()
    gang = [
        replace(p, agent=report(p.name, "failed", 1, exitCode=code, message="m",
                                failedAt=at(19 if p.rank == 1 else 19.4)))
        for p in agents(1, 4)
        for code in [victim[0] if p.rank == 1 else peers[0]]
    ]  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(20))
    assert j.status is not None
    assert [f.reason for f in j.status.failures] == kept
    assert j.status.failures[0].pod == "j-1-1"
    assert j.status.failures[0].message == "m; 3 other rank failures followed"


def test_two_lost_nodes_are_two_failures_and_one_restart() -> None:
    j = running()
    gang = [
        replace(p, agent=report(p.name, "failed", 1, exitCode=137 if p.rank in (1, 2) else 1,
                                failedAt=at(19 + p.rank / 10)))
        for p in agents(1, 4)
    ]  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(20))
    assert j.status is not None
    assert sorted(f.pod or "" for f in j.status.failures) == ["j-1-1", "j-1-2"]
    assert {f.reason for f in j.status.failures} == {"Killed"}, "the peers' exits follow them"
    assert j.status.restarts.infrastructure == 1


def test_a_peers_error_reported_before_the_kill_waits_for_the_kill() -> None:
    """The race seen on kind: a plain script's peer reports its "connection reset" (exit 1)
    before the killed worker's agent reports the kill. The restart must be the kill's."""
    j = running()
    gang = list(agents(1, 4))
    gang[2] = replace(gang[2], agent=report("j-1-2", "failed", 1, exitCode=1, message="reset",
                                            failedAt=at(19.4)))  # fmt: skip
    j, plan = step(j, Observed(pods=tuple(gang)), at(19.5))
    assert j.status is not None
    assert j.status.epoch == 1, "an application failure alone waits for the peers' reports"
    assert plan.requeue_after is not None
    assert plan.requeue_after <= PlannerConfig().silence_settle_seconds, "or for a silent peer"
    gang[1] = replace(gang[1], agent=report("j-1-1", "failed", 1, exitCode=137, message="killed",
                                            failedAt=at(19.45)))  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(19.6))
    assert j.status is not None
    assert j.status.epoch == 2
    assert (j.status.restarts.infrastructure, j.status.restarts.application) == (1, 0)
    assert [(f.reason, f.pod) for f in j.status.failures] == [("Killed", "j-1-1")]


def test_an_application_failure_alone_restarts_once_the_wait_is_over() -> None:
    j = running()
    gang = list(agents(1, 4))
    gang[2] = replace(gang[2], agent=report("j-1-2", "failed", 1, exitCode=1, message="bug",
                                            failedAt=at(19.4)))  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(19.5))
    assert j.status is not None
    assert j.status.epoch == 1
    j, _ = step(j, Observed(pods=tuple(gang)), at(19.4 + PlannerConfig().silence_settle_seconds))
    assert j.status is not None
    assert j.status.epoch == 2
    assert j.status.restarts.application == 1
