"""Apply a plan to the cluster, idempotently: status first (with optimistic concurrency), then
deletions and creations (404 and 409 tolerated), then events.

Why this order: the status write records the epoch before any of its pods exist, so an operator
killed half-way resumes the same epoch from status, and deterministic pod names make a repeated
create a no-op. No epoch is skipped or repeated, and no pod is duplicated.

Creates the watch has not shown yet are not repeated (`expectations`). The requests themselves
are the cluster room's (`cluster.writer`): this module only dispatches a plan's actions.

A create the API server refuses as Invalid (422), or a pod its PodSecurity admission does not
admit (403), is not an API hiccup: the same request would be refused again. It becomes a
`ChildRefusal` here, at the boundary (`ChildRefusedError` inside); the plan's other creations are
skipped, its deletions and events still happen, and `apply` reports the refusal so that the next
plan records it as a ConfigurationError (the planner decides what it means; see
`phalanx.operator.planner.refusal`).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, assert_never

from phalanx.models import labels
from phalanx.models.assignment import EpochAssignment
from phalanx.models.job import TrainingJob
from phalanx.operator import builder, planner
from phalanx.operator.cluster.answers import ChildRefusedError, refusable
from phalanx.operator.cluster.kube import ApiClient
from phalanx.operator.cluster.kueue import Workloads
from phalanx.operator.cluster.writer import ClusterWriter
from phalanx.operator.expectations import EXPECTATION_SECONDS, Expectations, JobKey
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import (
    Action,
    AssignEpoch,
    ChildRefusal,
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    DeletePods,
    EmitEvent,
    EnsureChildren,
    EnsurePodGroup,
    EnsureWorkload,
    FinishWorkload,
    MarkPodsReady,
    ObserveRecovery,
    PatchStatus,
    Plan,
    ReleaseQuota,
)

log = logging.getLogger(__name__)
POD_CREATIONS = (CreateNodePod, CreateStandbyPod)
CREATIONS = (EnsureChildren, EnsurePodGroup, EnsureWorkload, *POD_CREATIONS)
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Applied:
    """What carrying out a plan did that the next reconcile must know."""

    written: str | None = None
    """The resourceVersion of the status write, if there was one."""
    refused: ChildRefusal | None = None
    """A child the API server refused as Invalid; the plan's later creations were skipped."""


class Executor:
    """Carries out plans for every job (`for_job` binds it to one), from worker threads: each
    action dispatched to the cluster room (`ClusterWriter`, `Workloads`) with the builders'
    manifests, what was sent and not yet seen remembered (`expectations`)."""

    def __init__(
        self, api: ApiClient, build: builder.BuildSettings, metrics: OperatorMetrics,
        expectation_seconds: float = EXPECTATION_SECONDS,
    ) -> None:  # fmt: skip
        self.cluster = ClusterWriter(api, socket.gethostname())
        self.workloads = Workloads(api, build)
        self.build = build
        self.metrics = metrics
        self._published: dict[JobKey, str] = {}
        """The last assignment written per job: the plan repeats it until the epoch launched."""
        self.expectations = Expectations(expectation_seconds)

    def api_seconds(self) -> float:
        """Seconds the calling thread's requests have waited for the API server, all told."""
        return self.cluster.api_seconds()

    def forget(self, key: JobKey) -> None:
        """A job is gone (or its loop stopped): drop what was remembered of it."""
        self._published.pop(key, None)
        self.expectations.forget(key)

    def seen(self, key: JobKey, pods: set[str], going: set[str]) -> None:
        """The job's pods the watch shows now, and those being deleted (`Expectations.seen`)."""
        self.expectations.seen(key, pods, going)

    def for_job(self, raw: Mapping[str, Any], job: TrainingJob) -> JobExecutor:
        """The executor of the job read as `raw` (and parsed as `job`)."""
        return JobExecutor(self, raw, job)

    def apply(self, raw: Mapping[str, Any], job: TrainingJob, plan: Plan, now: datetime) -> Applied:
        """Carry out `plan` for the job read as `raw`; its events happened `now`."""
        written = None
        for write in plan.of_type(PatchStatus):
            written = self.cluster.write_status(raw, job, write.status)
            self.metrics.job_status(_ns(job), job.metadata.name or "", job.status, write.status)
        uses_podgroup = bool(plan.of_type(EnsurePodGroup))
        refused = None
        for step in _steps(plan.actions):
            if refused is not None and isinstance(step[0], CREATIONS):
                continue  # built from the same spec: it would most likely be refused too
            try:
                if isinstance(step[0], POD_CREATIONS):
                    self._apply_env(job)  # the pods read it when they start
                    pods = [self._pod(job, action, uses_podgroup) for action in step]
                    self.cluster.create_all([partial(self._create_pod, job, p) for p in pods])
                else:
                    self._act(job, step[0])
            except ChildRefusedError as error:
                refused = error.refusal
                log.warning(
                    "job %s/%s: the API server refused %s", _ns(job), job.metadata.name, error
                )
        for event in plan.events:
            self.cluster.emit(raw, event, now)
        return Applied(written, refused)

    def _pod(self, job: TrainingJob, action: Action, uses_podgroup: bool) -> Manifest:
        """The manifest of a pod the plan creates."""
        match action:
            case CreateNodePod() as pod:
                return builder.node_pod(
                    job,
                    pod.epoch,
                    pod.rank,
                    pod.nodes,
                    self.build,
                    pod.avoid_nodes,
                    uses_podgroup,
                    pod.master,
                    pod.agent,
                    pod.snapshot_bytes,
                )
            case CreateStandbyPod() as pod:
                return builder.standby_pod(
                    job,
                    pod.epoch,
                    pod.index,
                    self.build,
                    pod.avoid_nodes,
                    pod.warm,
                    pod.nodes,
                    pod.snapshot_bytes,
                )
        raise TypeError(f"not a pod creation: {action!r}")

    def _act(self, job: TrainingJob, action: Action) -> None:
        match action:
            case DeletePods(names=names, force=force, reported=reported):
                self._delete_pods(job, names, force, reported)
            case EnsureChildren(epoch=epoch):
                self._ensure_children(job, epoch)
            case EnsurePodGroup(min_member=size):
                self.cluster.ensure_pod_group(job, builder.pod_group(job, size), size)
            case EnsureWorkload() as wanted:
                refusable(job, "Workload", wanted.name, lambda: self.workloads.ensure(job, wanted))
            case ReleaseQuota(name=name, message=message):
                self.workloads.release_quota(job, name, message)
            case MarkPodsReady(name=name, ready=ready):
                self.workloads.mark_pods_ready(job, name, ready)
            case FinishWorkload(name=name, message=message):
                self.workloads.finish(job, name, message)
            case ObserveRecovery(
                seconds=seconds, failure_class=failure_class, parts=parts, until=until
            ):
                if until == "first-step":  # one measured to the pods running is in its event
                    self.metrics.recovery.labels(failure_class).observe(seconds)
                    for part, part_seconds in parts:
                        self.metrics.recovery_part.labels(part).observe(part_seconds)
            case DeleteJob():
                self.cluster.delete_job(job)
            case AssignEpoch(epoch=epoch, nodes=nodes, ranks=ranks):
                self._assign(job, epoch, nodes, ranks)
            case PatchStatus() | EmitEvent() | CreateNodePod() | CreateStandbyPod():
                pass  # written around the other actions, pods in batches (see `apply`)
            case _:
                assert_never(action)

    def _apply_env(self, job: TrainingJob) -> None:
        """The job's env ConfigMap (`builder.env_config_map`) as its spec says now, before pods
        that read it when they start: once per plan that creates pods, so that a spec changed
        while the job runs (spec.checkpoint, spec.trainer, spec.nccl) reaches the next epoch's
        pods, as it did when every variable was on the pod, and one deleted by hand is made
        again before a pod misses it (its container would not start: CreateContainerConfigError)."""
        self.cluster.apply(job, builder.env_config_map(job, self.build))

    def _create_pod(self, job: TrainingJob, manifest: Manifest) -> None:
        key, name = _key(job), manifest["metadata"]["name"]
        if self.expectations.pod_expected(key, name):
            return  # created by an earlier reconcile; the watch has not shown it yet
        self.cluster.create(job, manifest)
        self.expectations.pod_created(key, name)

    def _ensure_children(self, job: TrainingJob, epoch: int | None = None) -> None:
        """The job's Service, ServiceAccount, Role, RoleBinding, heartbeat and report Leases and
        disruption budget (the assignment Lease comes with the first assignment, `_assign`; the
        env ConfigMap with each plan's pods, `_apply_env`):
        once per job and report shard count in this operator's life, and again when the job
        needs more report shards (a Role that existed is made to grant them); every time
        without `epoch` (one was found missing). Not once per epoch: a restart that made them
        again sent six creates the API server answered 409, one after another before the
        epoch's pods. A child deleted by hand is made again by the next operator (a restart, or
        the leader's successor)."""
        key, again = _key(job), epoch is None
        ensured = (job.metadata.uid or "", builder.report_shard_count(job))
        if not again and self.expectations.children_made(key, ensured):
            return
        children = (
            builder.headless_service(job, self.build.master_port), builder.service_account(job),
            builder.role(job), builder.role_binding(job), builder.heartbeat_lease(job),
            builder.disruption_budget(job),
        )  # fmt: skip
        self.cluster.ensure_children(job, children, builder.report_leases(job))
        if not again:
            self.expectations.children_created(key, ensured)

    def _assign(
        self, job: TrainingJob, epoch: int, nodes: int, ranks: tuple[tuple[str, int], ...]
    ) -> None:
        """Publish the epoch's assignment on the assignment Lease, which every agent watches.
        Rank 0's pod is where the epoch rendezvouses; its agents started it in place."""
        by_rank = {rank: pod for pod, rank in ranks}
        assignment = EpochAssignment(
            epoch=epoch, nodes=nodes,
            master_addr=builder.pod_address(job, by_rank[0], self.build),
            master_port=self.build.master_port, ranks=dict(ranks),
        )  # fmt: skip
        value = assignment.model_dump_json(by_alias=True)
        key = _key(job)
        if self._published.get(key) == value:
            return
        lease = builder.assignment_lease(job)
        lease["metadata"]["annotations"] = {labels.ASSIGNMENT: value}
        self.cluster.publish(job, lease, value, first=key not in self._published)
        self._published[key] = value

    def _delete_pods(
        self, job: TrainingJob, names: tuple[str, ...], force: bool, reported: tuple[str, ...]
    ) -> None:
        key = _key(job)
        due = [n for n in names if not self.expectations.delete_expected(key, n, force)]
        for name in due:  # the others were deleted by an earlier reconcile, not yet seen going
            self.expectations.pod_deleted(key, name, force)
        self.cluster.delete_pods(job, due, 0 if force else None, reported)


@dataclass(frozen=True)
class JobExecutor(planner.Executor):
    """The cluster executor bound to one job as read: the planner's `Executor` for that job."""

    cluster: Executor
    raw: Mapping[str, Any]
    job: TrainingJob

    def apply(self, plan: Plan, now: datetime) -> Applied:
        return self.cluster.apply(self.raw, self.job, plan, now)


def _steps(actions: Sequence[Action]) -> list[list[Action]]:
    """The plan's actions in order, a run of pod creations as one step (sent in batches), and an
    epoch's assignment first: the pods it carries over start the epoch as soon as they read it,
    and they are most of a restart's pods; the retired pods' deletes and the new pods' creates
    can follow (a storm's restart took a second or so to send those first)."""
    steps: list[list[Action]] = []
    for action in sorted(actions, key=lambda a: not isinstance(a, AssignEpoch)):
        pod = isinstance(action, POD_CREATIONS)
        if pod and steps and isinstance(steps[-1][0], POD_CREATIONS):
            steps[-1].append(action)
        else:
            steps.append([action])
    return steps


def _ns(job: TrainingJob) -> str:
    return job.metadata.namespace or "default"


def _key(job: TrainingJob) -> JobKey:
    return (_ns(job), job.metadata.name or "")
