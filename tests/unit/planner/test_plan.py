"""The reconcile ladder, scenario by scenario: each test feeds the planner what a cluster would
show and checks the actions and the status it writes. No cluster, no I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.models import TrainingJob
from phalanx.models.names import MAX_EPOCH
from phalanx.operator.planner import (
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    DeletePods,
    EnsureChildren,
    NodeView,
    Observed,
    ObserveRecovery,
    PatchStatus,
)
from phalanx.operator.planner.config import PlannerConfig
from tests.unit.planner.builders import at, beat, events, job, launched, pods, step


def test_new_job_gets_epoch_1_at_desired_size_with_status_written_first() -> None:
    j, plan = step(job(), Observed(), at(0))
    assert isinstance(plan.actions[0], PatchStatus)
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes, j.status.world_size, j.status.phase) == (
        1,
        4,
        8,
        "Pending",
    )
    assert EnsureChildren(1) in plan.actions
    assert [(a.epoch, a.rank, a.nodes) for a in plan.of_type(CreateNodePod)] == [
        (1, r, 4) for r in range(4)
    ]
    assert events(plan) == ["Started"]


def test_status_is_not_rewritten_when_nothing_changed() -> None:
    j = launched()
    _, plan = step(j, Observed(pods=tuple(pods(1, 4))), at(11))
    assert plan.of_type(PatchStatus) == []


def test_application_failure_restarts_same_size_after_backoff() -> None:
    j = launched()
    failed = pods(1, 4)
    failed[2] = replace(failed[2], phase="Failed", exit_code=1, terminated_reason="Error")
    j, plan = step(j, Observed(pods=tuple(failed)), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes, j.status.restarts.application) == (2, 4, 1)
    assert j.status.failures[-1].reason == "Error"
    assert j.status.failures[-1].pod == "j-1-2"
    assert plan.of_type(DeletePods) == [DeletePods(tuple(f"j-1-{r}" for r in range(4)))]
    assert plan.of_type(CreateNodePod) == []  # old pods must be gone first
    assert "Restart" in events(plan)
    # old pods gone, but backoff (5 s) not over: nothing created yet
    j, plan = step(j, Observed(), at(22))
    assert plan.of_type(CreateNodePod) == []
    assert plan.requeue_after == 3
    j, plan = step(j, Observed(), at(25))
    assert [a.epoch for a in plan.of_type(CreateNodePod)] == [2] * 4


def test_infrastructure_failures_are_counted_apart_and_restart_at_once() -> None:
    j = launched()
    for k, broken in enumerate(
        [
            {"terminated_reason": "OOMKilled", "phase": "Failed", "exit_code": 137},
            {"pod_reason": "Evicted", "phase": "Failed"},
            {"deleting": True},
        ]
    ):
        assert j.status is not None
        epoch = j.status.epoch
        current = pods(epoch, 4)
        current[1] = replace(current[1], **broken)  # type: ignore[arg-type]
        j, _ = step(j, Observed(pods=tuple(current)), at(100 * (k + 1)))
        j, plan = step(j, Observed(), at(100 * (k + 1) + 1))
        assert len(plan.of_type(CreateNodePod)) == 4
        j, _ = step(j, Observed(pods=tuple(pods(epoch + 1, 4))), at(100 * (k + 1) + 2))
    assert j.status is not None
    assert (j.status.restarts.infrastructure, j.status.restarts.application) == (3, 0)


def test_node_not_ready_and_missing_pod_are_infrastructure() -> None:
    j = launched()
    nodes = {"node-3": NodeView("node-3", ready=False)}
    j2, _ = step(j, Observed(pods=tuple(pods(1, 4)), nodes=nodes), at(20))
    assert j2.status.failures[-1].reason == "NodeNotReady"  # type: ignore[union-attr]
    j3, _ = step(j, Observed(pods=tuple(pods(1, 3))), at(20))
    assert j3.status.failures[-1].reason == "PodDeleted"  # type: ignore[union-attr]
    assert j3.status.restarts.infrastructure == 1  # type: ignore[union-attr]


def test_a_pod_on_a_lost_node_is_force_deleted_and_not_waited_for() -> None:
    """Its kubelet can never confirm a graceful delete: the pod would stay Terminating until the
    node came back, and the new epoch would wait that long (found on kind)."""
    j = launched()
    lost = {"node-3": NodeView("node-3", ready=False)}
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), nodes=lost), at(20))
    assert j.status is not None
    assert j.status.epoch == 2
    stale = pods(1, 4)
    stale[3] = replace(stale[3], deleting=True)
    j, plan = step(j, Observed(pods=tuple(stale), nodes=lost), at(21))
    assert DeletePods(("j-1-3",), force=True) in plan.actions
    j, plan = step(j, Observed(pods=(stale[3],), nodes=lost), at(22))
    assert plan.of_type(CreateNodePod), "the new epoch does not wait for the lost node's pod"


def test_recovery_time_is_observed_at_the_new_epochs_first_step() -> None:
    j = launched()
    failed = pods(1, 4)
    failed[0] = replace(failed[0], deleting=True)
    j, _ = step(j, Observed(pods=tuple(failed)), at(20))
    j, _ = step(j, Observed(), at(21))
    j, plan = step(j, Observed(pods=tuple(pods(2, 4))), at(27.5))
    assert plan.of_type(ObserveRecovery) == [], "running pods are not training yet"
    j, plan = step(j, Observed(pods=tuple(pods(2, 4)), heartbeat=beat(2, 41)), at(33))
    assert plan.of_type(ObserveRecovery) == [ObserveRecovery(13, "infrastructure", epoch=2)]
    assert j.status.recovering_since is None  # type: ignore[union-attr]


def test_image_pull_error_is_a_condition_not_a_restart_loop() -> None:
    j, _ = step(job(), Observed(), at(0))
    stuck = pods(1, 4, phase="Pending", waiting_reason="ImagePullBackOff", message="not found")
    for t in (5, 6, 7):
        j, plan = step(j, Observed(pods=tuple(stuck)), at(t))
        assert plan.of_type(CreateNodePod) == []
        assert plan.of_type(DeletePods) == []
    assert j.status is not None
    assert j.status.epoch == 1
    assert j.status.restarts.total == 0
    condition = next(c for c in j.status.conditions if c.type == "ConfigurationError")
    assert condition.status == "True"
    assert condition.reason == "ImagePullBackOff"
    assert len(j.status.failures) == 1


def test_budget_exhausted_fails_naming_the_last_failure() -> None:
    j = launched(job(failurePolicy={"maxRestarts": 0}))
    failed = pods(1, 4)
    failed[3] = replace(failed[3], phase="Failed", exit_code=3)
    j, plan = step(j, Observed(pods=tuple(failed)), at(20))
    assert j.status is not None
    assert j.status.phase == "Failed"
    failed_condition = next(c for c in j.status.conditions if c.type == "Failed")
    assert failed_condition.reason == "RestartBudgetExhausted"
    assert "maxRestarts (0) exhausted" in failed_condition.message
    assert "j-1-3" in failed_condition.message
    assert "BudgetExhausted" in events(plan)


def test_success_and_ttl() -> None:
    j = launched(job(ttlSecondsAfterFinished=30))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4, phase="Succeeded", exit_code=0))), at(50))
    assert j.status is not None
    assert j.status.phase == "Succeeded"
    assert j.status.completion_time == at(50)
    assert plan.requeue_after == 30
    _, plan = step(j, Observed(), at(79))
    assert plan.of_type(DeleteJob) == []
    _, plan = step(j, Observed(), at(80))
    assert plan.of_type(DeleteJob) == [DeleteJob()]


def test_suspend_and_resume() -> None:
    j = launched()
    j = j.model_copy(update={"spec": j.spec.model_copy(update={"suspend": True})})
    j, plan = step(j, Observed(pods=tuple(pods(1, 4))), at(20))
    assert j.status is not None
    assert j.status.phase == "Suspended"
    assert len(plan.of_type(DeletePods)[0].names) == 4
    j = j.model_copy(update={"spec": j.spec.model_copy(update={"suspend": False})})
    j, plan = step(j, Observed(), at(30))
    assert j.status is not None
    assert (j.status.epoch, j.status.phase) == (2, "Pending")
    assert len(plan.of_type(CreateNodePod)) == 4


def suspend(j: TrainingJob, value: bool) -> TrainingJob:
    return j.model_copy(update={"spec": j.spec.model_copy(update={"suspend": value})})


def test_a_job_created_suspended_counts_its_deadline_from_its_resume() -> None:
    """The batch Job's rule: activeDeadlineSeconds counts from the last resume (startTime is
    reset then), never while suspended."""
    j, _ = step(job(suspend=True, activeDeadlineSeconds=60), Observed(), at(0))
    assert j.status is not None
    assert (j.status.phase, j.status.start_time) == ("Suspended", None)
    j, _ = step(suspend(j, False), Observed(), at(100))
    assert j.status is not None
    assert j.status.start_time == at(100)
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(110))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(159.9))
    assert j.status is not None
    assert j.status.phase == "Running"
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(160))
    assert j.status is not None
    assert (j.status.phase, j.status.conditions[-1].reason) == ("Failed", "DeadlineExceeded")


def test_time_suspended_is_not_in_goodputs_wall_time() -> None:
    j = launched()  # started at 0
    j, _ = step(suspend(j, True), Observed(pods=tuple(pods(1, 4))), at(30))
    assert j.status is not None
    assert j.status.active_seconds == 30
    j = j.model_copy(update={"status": j.status.model_copy(update={"lost_seconds": 4.0})})
    j, _ = step(suspend(j, False), Observed(), at(1000))
    j, _ = step(j, Observed(pods=tuple(pods(2, 4))), at(1010))
    assert j.status is not None
    assert j.status.goodput == pytest.approx(1 - 4 / 40), "30 s before the suspend, 10 after"


def test_deadline_exceeded_fails_the_job() -> None:
    j = launched(job(activeDeadlineSeconds=60))
    j, plan = step(j, Observed(pods=tuple(pods(1, 4))), at(59))
    assert plan.requeue_after is not None
    assert plan.requeue_after <= 1
    j, plan = step(j, Observed(pods=tuple(pods(1, 4))), at(60))
    assert j.status is not None
    assert j.status.phase == "Failed"
    assert len(plan.of_type(DeletePods)[0].names) == 4


def test_shrink_after_schedule_timeout_then_grow_back() -> None:
    spec = {"failurePolicy": {"scheduleTimeoutSeconds": 30}}
    config = PlannerConfig(grow_cooldown_seconds=5)
    j, _ = step(job(**spec), Observed(), at(0))
    pending = pods(1, 4)
    pending[3] = replace(pending[3], phase="Pending", node_name=None)
    j, plan = step(j, Observed(pods=tuple(pending)), at(10), config)
    assert plan.requeue_after == 20
    j, plan = step(j, Observed(pods=tuple(pending)), at(31), config)
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3)
    assert "Shrink" in events(plan)
    j, plan = step(j, Observed(), at(32), config)
    assert len(plan.of_type(CreateNodePod)) == 3
    j, plan = step(j, Observed(pods=tuple(pods(2, 3))), at(33), config)
    assert plan.of_type(CreateStandbyPod) == [CreateStandbyPod(2, 0, nodes=4)]
    standby = replace(pods(2, 1, phase="Pending")[0], name="j-2-s0", role="standby")
    j, plan = step(
        j, Observed(pods=(*pods(2, 3), standby)), at(34), config
    )  # scheduled, cooling down
    assert j.status is not None
    assert j.status.epoch == 2
    assert plan.requeue_after == 4
    j, plan = step(j, Observed(pods=(*pods(2, 3), standby)), at(38), config)
    assert (j.status.epoch, j.status.nodes) == (3, 4)  # type: ignore[union-attr]
    assert "Grow" in events(plan)


def test_shrink_respects_model_parallel_groups_and_min() -> None:
    spec = {
        "parallelism": {"tensor": 2, "pipeline": 2},
        "failurePolicy": {"scheduleTimeoutSeconds": 30},
    }
    j, _ = step(job(**spec), Observed(), at(0))
    pending = pods(1, 4)
    pending[3] = replace(pending[3], phase="Pending", node_name=None)
    j, _ = step(j, Observed(pods=tuple(pending)), at(1))
    j, _ = step(j, Observed(pods=tuple(pending)), at(31))
    assert j.status is not None
    assert j.status.nodes == 2
    only_one = pods(2, 2)
    only_one[1] = replace(only_one[1], phase="Pending", node_name=None)
    j, _ = step(j, Observed(), at(32))
    j, _ = step(j, Observed(pods=tuple(only_one)), at(33))
    j, _plan = step(j, Observed(pods=tuple(only_one)), at(70))
    assert j.status is not None
    assert j.status.nodes == 2
    assert any(c.type == "Unschedulable" and c.status == "True" for c in j.status.conditions)


def test_straggler_node_is_avoided_next_epoch() -> None:
    j = launched()
    hb = beat(1, 50, rank_step_seconds=[1.0, 1.0, 1.0, 1.0, 3.5, 1.0, 1.0, 1.0], window_steps=20)
    j, plan = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=hb), at(20))
    assert j.status is not None
    assert j.status.avoid_nodes == ["node-2"]
    assert "Straggler" in events(plan)
    j, plan = step(j, Observed(), at(21))
    assert {a.avoid_nodes for a in plan.of_type(CreateNodePod)} == {("node-2",)}


def test_progress_and_checkpoint_come_from_the_heartbeat() -> None:
    j = launched()
    hb = beat(1, 7, loss=2.5, checkpoint={"step": 5, "path": "/ckpt/step-5"})
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), heartbeat=hb), at(30))
    assert j.status is not None
    assert j.status.progress is not None
    assert (j.status.progress.step, j.status.progress.loss) == (7, 2.5)
    assert j.status.last_checkpoint is not None
    assert j.status.last_checkpoint.step == 5


def test_epoch_never_passes_the_limit_the_job_fails_instead() -> None:
    j, _ = step(job(), Observed(), at(0))
    assert j.status is not None
    status = j.status.model_copy(update={"epoch": MAX_EPOCH})
    j = j.model_copy(update={"status": status})
    running = pods(MAX_EPOCH, 4)
    j, _ = step(j, Observed(pods=tuple(running)), at(10))
    assert j.status is not None
    assert (j.status.epoch, j.status.phase) == (MAX_EPOCH, "Running")
    failed = list(running)
    failed[1] = replace(failed[1], phase="Failed", exit_code=1, terminated_reason="Error")
    j, plan = step(j, Observed(pods=tuple(failed)), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.phase) == (MAX_EPOCH, "Failed")
    failed_condition = next(c for c in j.status.conditions if c.type == "Failed")
    assert (failed_condition.reason, failed_condition.message) == (
        "EpochLimitReached",
        f"the job reached epoch {MAX_EPOCH}, the last one its pod hostnames "
        "<name>-<epoch>-<rank> can hold; create it again to go on from its last checkpoint",
    )
    assert plan.of_type(CreateNodePod) == []
    assert [e.reason for e in plan.events] == ["Failed"]


def test_pods_ahead_of_status_are_adopted_not_duplicated() -> None:
    # the operator died after creating epoch-2 pods but before its status write landed
    j = launched()
    j, plan = step(j, Observed(pods=tuple(pods(2, 3, epoch_nodes=3))), at(20))
    assert j.status is not None
    assert j.status.epoch == 2
    assert (j.status.nodes, j.status.world_size) == (3, 6)
    assert plan.of_type(CreateNodePod) == []


@given(st.integers(2, 8), st.integers(0, 6), st.sampled_from([1, 2, 4]))
def test_created_ranks_are_a_permutation(max_nodes: int, scale: int, nproc: int) -> None:
    desired = max(2, min(max_nodes, 2 + scale))
    j = job(replicas={"min": 2, "max": max_nodes, "desired": desired}, nprocPerNode=nproc)
    j, plan = step(j, Observed(), at(0))
    ranks = sorted(a.rank for a in plan.of_type(CreateNodePod))
    assert ranks == list(range(j.status.nodes))  # type: ignore[union-attr]
    assert 2 <= j.status.nodes <= max_nodes  # type: ignore[union-attr]


def test_gang_without_podgroups_says_so_once_per_epoch() -> None:
    """No field accepted and ignored: where the cluster serves no PodGroup, `gang` cannot act,
    and the job says so when it creates an epoch's pods (not on every reconcile after)."""
    ganged = job(gang=True, schedulerName="scheduler-plugins-scheduler")
    j, _ = step(ganged, Observed(), at(0))
    j, plan = step(j, Observed(), at(1))
    assert "GangSchedulingUnavailable" in events(plan)
    created = tuple(pods(1, 2, phase="Pending"))
    j, plan = step(j, Observed(pods=created), at(2))
    assert "GangSchedulingUnavailable" not in events(plan)
    served = replace(Observed(), podgroups_supported=True)
    j, _ = step(ganged, served, at(0))
    j, plan = step(j, served, at(1))
    assert "GangSchedulingUnavailable" not in events(plan)
