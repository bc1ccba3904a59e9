"""Fields that show in the planner's decisions: each scenario runs `plan` over what a cluster
would show (as `tests/unit/planner` does) and returns what the field decides there."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from phalanx.models import TrainingJob
from phalanx.models.assignment import AgentReport
from phalanx.models.status import TrainingJobStatus
from phalanx.operator.planner import (
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    EnsurePodGroup,
    Observed,
    PodView,
)
from phalanx.operator.planner.actions import Plan
from tests.unit.planner.builders import T0, at, beat, pods, step
from tests.unit.spec_effects.build import Effect


def status(job: TrainingJob) -> TrainingJobStatus:
    assert job.status is not None
    return job.status


def first_plan(job: TrainingJob, observed: Observed | None = None) -> tuple[TrainingJob, Plan]:
    """The planner's first look at a new job, at t=0."""
    return step(job, observed or Observed(), at(0))


def first_status(job: TrainingJob) -> TrainingJobStatus:
    return status(first_plan(job)[0])


def launched(job: TrainingJob) -> TrainingJob:
    """The job with its epoch 1 created and all its pods running since t=10."""
    job, _ = first_plan(job)
    job, _ = step(job, Observed(pods=tuple(pods(1, status(job).nodes))), at(10))
    assert status(job).phase == "Running"
    return job


def running(job: TrainingJob, when: float, **observed: Any) -> tuple[TrainingJob, Plan]:
    """One more look at `when`, epoch 1's pods still running."""
    return step(job, Observed(pods=tuple(pods(1, status(job).nodes)), **observed), at(when))


def rank_1_failed(job: TrainingJob, **state: Any) -> TrainingJob:
    """The job after it launched and node rank 1 failed as `state` says, at t=20."""
    return fail_rank_1(launched(job), **state)


def fail_rank_1(job: TrainingJob, **state: Any) -> TrainingJob:
    """A launched job after node rank 1 failed as `state` says, at t=20."""
    seen = pods(1, status(job).nodes)
    seen[1] = replace(seen[1], phase="Failed", **state)
    return step(job, Observed(pods=tuple(seen)), at(20))[0]


def _outcome(job: TrainingJob) -> tuple[str | None, int]:
    return status(job).phase, status(job).epoch


def _planned_size(job: TrainingJob) -> tuple[int, int]:
    """The first epoch's size, in status and in node pods created."""
    job, plan = first_plan(job)
    return status(job).nodes, len(plan.of_type(CreateNodePod))


def _half_unschedulable(job: TrainingJob, when: float) -> tuple[int, int]:
    """Epoch and size at `when` after ranks 2 and 3 stayed unschedulable since t=0."""
    job, _ = first_plan(job)
    seen = pods(1, 4)
    seen[2:] = [replace(p, phase="Pending", node_name=None) for p in seen[2:]]
    job, _ = step(job, Observed(pods=tuple(seen)), at(when))
    return status(job).epoch, status(job).nodes


def _after_application_failure(job: TrainingJob) -> tuple[str | None, int]:
    return _outcome(rank_1_failed(job, exit_code=1, terminated_reason="Error"))


def _after_infrastructure_failure(job: TrainingJob) -> tuple[str | None, int]:
    return _outcome(rank_1_failed(job, exit_code=137, terminated_reason="OOMKilled"))


def _restarts_after_exit_42(job: TrainingJob) -> tuple[int, int]:
    """Application and infrastructure restarts counted for an exit with code 42."""
    restarts = status(rank_1_failed(job, exit_code=42, terminated_reason="Error")).restarts
    return restarts.application, restarts.infrastructure


def _backoff(job: TrainingJob, failures_before: int = 0) -> float:
    """Seconds the restart waits after an application failure, after `failures_before` others
    in a row."""
    job = launched(job)
    before = status(job).model_copy(update={"consecutive_failures": failures_before})
    failed = fail_rank_1(job.model_copy(update={"status": before}), exit_code=1)
    restart_after = status(failed).current.restart_after
    assert restart_after is not None
    return (restart_after - at(20)).total_seconds()


def _epoch_when_stalled(job: TrainingJob) -> int:
    """The epoch 15 s after step 5, the last one reported, at t=20 (no step time known)."""
    job, _ = running(launched(job), 20, heartbeat=beat(1, 5))
    job, _ = running(job, 35, heartbeat=beat(1, 5))
    return status(job).epoch


def _loading(epoch: int, n: int, renewed: datetime) -> tuple[PodView, ...]:
    """`n` running node pods whose agents load the epoch's checkpoint, renewed at `renewed`."""
    reports = {"state": "running", "epoch": epoch, "time": T0, "phase": "loading"}
    return tuple(
        replace(p, agent=AgentReport.model_validate({**reports, "pod": p.name, "renewed": renewed}))
        for p in pods(epoch, n)
    )


def _epoch_when_startup_lasts_60s(job: TrainingJob) -> int:
    """The epoch when its pods, running since t=1, still load at t=61 (their agents alive)."""
    job, _ = first_plan(job)
    job, _ = step(job, Observed(pods=_loading(1, 4, at(1))), at(1))
    job, _ = step(job, Observed(pods=_loading(1, 4, at(60.5))), at(61))
    return status(job).epoch


def _avoided_when_rank_2_computes_1_5x(job: TrainingJob) -> tuple[int, list[str]]:
    """Epoch and avoided nodes after rank 2 computed 1.5 x as long as the others for 20 steps."""
    slow = beat(1, 50, rank_compute_seconds=[1.0, 1.0, 1.5, 1.0], window_steps=20)
    job, _ = running(launched(job), 20, heartbeat=slow)
    return status(job).epoch, status(job).avoid_nodes


def _suspended(job: TrainingJob) -> tuple[str | None, int]:
    job, plan = first_plan(job)
    return status(job).phase, len(plan.of_type(CreateNodePod))


def _deleted_20s_after_success(job: TrainingJob) -> bool:
    job = launched(job)
    job, _ = step(job, Observed(pods=tuple(pods(1, 4, phase="Succeeded"))), at(20))
    assert status(job).phase == "Succeeded"
    _, plan = step(job, Observed(), at(40))
    return bool(plan.of_type(DeleteJob))


def _phase_at_40s(job: TrainingJob) -> str | None:
    return status(running(launched(job), 40)[0]).phase


def _standbys_created(job: TrainingJob) -> int:
    """Standby pods created for a job running at its full size."""
    _, plan = running(launched(job), 20)
    return len(plan.of_type(CreateStandbyPod))


def _pod_groups(job: TrainingJob) -> list[int]:
    """The job's PodGroup ensured (its minMember), where the cluster serves PodGroups."""
    _, plan = first_plan(job, Observed(podgroups_supported=True))
    return [a.min_member for a in plan.of_type(EnsurePodGroup)]


SCHEDULER = {"schedulerName": "scheduler-plugins-scheduler"}

EFFECTS: dict[str, Effect] = {
    "replicas.min": Effect(
        {"replicas.min": 3}, lambda j: _half_unschedulable(j, 301), (1, 4), {"replicas.min": 2}
    ),
    "replicas.max": Effect({"replicas.max": 3}, _planned_size, (3, 3), {"replicas.max": 4}),
    "replicas.desired": Effect({"replicas.desired": 3}, _planned_size, (3, 3)),
    "failurePolicy.maxRestarts": Effect(
        {"failurePolicy.maxRestarts": 0}, _after_application_failure, ("Failed", 1)
    ),
    "failurePolicy.maxInfraRestarts": Effect(
        {"failurePolicy.maxInfraRestarts": 0}, _after_infrastructure_failure, ("Failed", 1)
    ),
    "failurePolicy.retryableExitCodes": Effect(
        {"failurePolicy.retryableExitCodes": [42]}, _restarts_after_exit_42, (0, 1)
    ),
    "failurePolicy.backoff.initialSeconds": Effect(
        {"failurePolicy.backoff.initialSeconds": 7}, _backoff, 7.0
    ),
    "failurePolicy.backoff.maxSeconds": Effect(
        {"failurePolicy.backoff.maxSeconds": 60}, lambda j: _backoff(j, failures_before=5), 60.0
    ),
    "failurePolicy.hangTimeoutSeconds": Effect(
        {"failurePolicy.hangTimeoutSeconds": 10}, _epoch_when_stalled, 2
    ),
    "failurePolicy.startupTimeoutSeconds": Effect(
        {"failurePolicy.startupTimeoutSeconds": 30}, _epoch_when_startup_lasts_60s, 2
    ),
    "failurePolicy.stragglerFactor": Effect(
        {"failurePolicy.stragglerFactor": 1.2}, _avoided_when_rank_2_computes_1_5x, (2, ["node-2"])
    ),
    "failurePolicy.scheduleTimeoutSeconds": Effect(
        {"failurePolicy.scheduleTimeoutSeconds": 60}, lambda j: _half_unschedulable(j, 100), (2, 2)
    ),
    "suspend": Effect({"suspend": True}, _suspended, ("Suspended", 0)),
    "ttlSecondsAfterFinished": Effect(
        {"ttlSecondsAfterFinished": 10}, _deleted_20s_after_success, True
    ),
    "activeDeadlineSeconds": Effect({"activeDeadlineSeconds": 30}, _phase_at_40s, "Failed"),
    "spares": Effect({"spares": 1}, _standbys_created, 1),
    "gang": Effect({**SCHEDULER, "gang": True}, _pod_groups, [4], SCHEDULER),
}
