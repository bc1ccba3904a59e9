"""The kopf shell: watches feed indices (the pods' and the Leases' from Phalanx's own watches,
`pod_watch`; the nodes' and Kueue Workloads' from kopf's), and one reconcile loop per job
(`loops`) runs observe -> plan -> execute whenever something about the job changed, or when
the planner asked to look again.

Why a loop per job instead of create/update/timer handlers: kopf is edge-triggered, while a
controller must reconcile from state. Handlers never sleep; errors are mapped to a retry in the
loop, except a child the API server refused as Invalid: the executor reports it, and it is
handed to the next plan (`Observed.refused`), which records a ConfigurationError instead of
trying again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from phalanx.models import labels
from phalanx.models.job import GROUP, PLURAL, VERSION, TrainingJob
from phalanx.operator import observe
from phalanx.operator.builder.workload import KUEUE_GROUP, KUEUE_VERSION, WORKLOAD_PLURAL
from phalanx.operator.cluster.kube import ServedGroup
from phalanx.operator.cluster.pod_watch import LeaseWatch, PodWatch
from phalanx.operator.cluster.status_write import JobGoneError, StatusConflictError
from phalanx.operator.cluster.watch import JobIndex
from phalanx.operator.essence import AnnotationProgressStorage, SpecDiffBaseStorage
from phalanx.operator.execute import Applied, Executor
from phalanx.operator.loops import JobLoops
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.observe import LeaseFacts
from phalanx.operator.planner import (
    ChildRefusal,
    NodeView,
    Observed,
    PlannerConfig,
    PodView,
    plan,
)
from phalanx.operator.planner.congestion import LateAcknowledgements, acknowledged, assignment_out

log = logging.getLogger(__name__)
JobKey = tuple[str, str]
CONFLICT_RETRY_SECONDS = 0.2
STALE_WAIT_SECONDS = 1.0
FINALIZER = "phalanx.dev/operator"
"""The finalizer operators before the jobs' own loops (`loops`) put on every job, for kopf's
daemons. Named still so that kopf takes it off the jobs that carry it (no handler requires it
now): they can go."""


class NotLeadingError(Exception):
    """This replica may not act now (its leader Lease is past its renew deadline)."""


class Reconciler:
    """Per-operator state shared by the handlers: wakers, the executor, metrics, config."""

    def __init__(
        self, executor: Executor, metrics: OperatorMetrics, config: PlannerConfig,
        resync_seconds: float, podgroups: ServedGroup | None, api_workers: int = 64,
        may_act: Callable[[], bool] = lambda: True,
        unhealthy_node_labels: Mapping[str, frozenset[str]] | None = None,
        kueue: ServedGroup | None = None,
    ) -> None:  # fmt: skip
        self.executor = executor
        self.kueue = kueue
        """Whether the cluster serves Kueue's Workloads (jobs that name a queue are admitted by
        it); asked again while it does not, so Kueue installed after the operator is found."""
        self.unhealthy_node_labels = dict(unhealthy_node_labels or {})
        """Node label values that mean the node is being taken away (`observe.leaving`)."""
        self.metrics = metrics
        self.config = config
        self.late_acks = LateAcknowledgements(config.assignment_ack_seconds)
        """Every job's acknowledgements of new epochs: whether they arrive late (`congestion`)."""
        self.resync_seconds = resync_seconds
        self.podgroups = podgroups
        """Whether the cluster serves scheduler-plugins' PodGroups (for `gang: true`), asked
        again like `kueue`."""
        self.may_act = may_act
        """False while this replica is not sure it leads (leader.py `leading`): no plan is
        carried out."""
        self._wakers: dict[JobKey, asyncio.Event] = {}
        # API calls block; they run on their own pool so that many jobs' reconciles overlap.
        self._pool = ThreadPoolExecutor(api_workers, thread_name_prefix="phalanx-api")
        self._slots = api_workers
        self._free: asyncio.Semaphore | None = None
        """One slot per API thread: a reconcile observes and plans only once it holds one, so
        its plan is as fresh as the watch at the moment its writes can go (a plan made while
        1 000 others queued for a thread was 30 s stale), and no more plans are alive at once
        than there are threads to carry them out. The wait for a slot is the queue's, reported
        apart from the reconcile (as controller-runtime's workqueue does)."""
        self._stale_version: dict[JobKey, str] = {}
        self._refused: dict[JobKey, ChildRefusal] = {}
        self._own: dict[JobKey, float] = {}
        """Each job's last reconcile's own seconds (see `loops.pace_seconds`)."""
        self._node_health: dict[str, tuple[bool, str | None]] = {}
        self._nodes: dict[str, NodeView] = {}
        """The nodes by name as last seen (`node_seen`), for the reconciles (`_nodes_by_name`)."""
        self._placed: dict[str, set[JobKey]] = {}
        """Node name -> the jobs that had a pod on it."""

    def waker(self, key: JobKey) -> asyncio.Event:
        return self._wakers.setdefault(key, asyncio.Event())

    def poke(self, key: JobKey) -> None:
        """Something about job `key` changed: reconcile it soon."""
        if key in self._wakers:
            self._wakers[key].set()

    def pod_changed(self, key: JobKey, node: str | None) -> None:
        """A pod of job `key` changed (on `node`, where known): reconcile the job soon."""
        self.poke(key)
        self.pod_placed(key, node)

    def pod_placed(self, key: JobKey, node: str | None) -> None:
        """Job `key` has a pod on `node` (kept until the job is forgotten: a stale entry only
        wakes a job once too often)."""
        if node:
            self._placed.setdefault(node, set()).add(key)

    def node_seen(self, view: NodeView) -> None:
        """A node changed; only its readiness and whether it is being taken away concern the
        jobs. One that got worse wakes the jobs with pods on it; one that got better wakes
        every job (capacity for a job to grow, or to be placed). Waking every job at each of a
        storm's lost nodes queued the hit jobs' reconciles behind the others'."""
        self._nodes[view.name] = view
        health = (view.ready, view.leaving)
        before = self._node_health.get(view.name, health)
        self._node_health[view.name] = health
        if before == health:
            return
        better = (view.ready and not before[0]) or (before[1] is not None and view.leaving is None)
        if better:
            self.wake_all()
            return
        for key in list(self._placed.get(view.name, set())):
            if key in self._wakers:
                self._wakers[key].set()

    def _nodes_by_name(self, indexed: Collection[NodeView]) -> dict[str, NodeView]:
        """The nodes by name: kept as they are seen, not made from the index at each reconcile
        (a share of the operator's CPU at many jobs on many nodes: docs/figures.md, "CPU").
        kopf tells no handler of a deleted node: the index then holds fewer, and the map is made
        again from it (a node seen but not yet indexed comes back once it is; one missing meanwhile
        only looks not lost, `Observed.on_lost_node`)."""
        if len(indexed) != len(self._nodes):
            self._nodes = {n.name: self._nodes.get(n.name, n) for n in indexed}
        return self._nodes

    def wake_all(self) -> None:
        """Reconcile every job soon (the pods were listed; a node got better)."""
        for waker in list(self._wakers.values()):
            waker.set()

    def own_seconds(self, key: JobKey) -> float:
        """The own seconds (plan and execute, less the API server's) of the job's reconcile
        since this was last asked; 0 for one that returned before planning."""
        return self._own.pop(key, 0.0)

    def close(self) -> None:
        """The operator stopped: release the API threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _with_late_acks(self, key: JobKey, job: TrainingJob, observed: Observed,
                        now: datetime) -> Observed:  # fmt: skip
        """The job's acknowledgements counted (`LateAcknowledgements.seen`), and the snapshot
        with when any job's last came late."""
        status = job.status
        if status is not None and status.epoch and status.current.ranks:
            count = acknowledged(observed, status.epoch, status.current)
            self.late_acks.seen(key, status.epoch, count, assignment_out(status.current), now)
        return dataclasses.replace(observed, late_acks_at=self.late_acks.last())

    def forget(self, key: JobKey) -> None:
        self._wakers.pop(key, None)
        self._stale_version.pop(key, None)
        self._refused.pop(key, None)
        self._own.pop(key, None)
        self.late_acks.forget(key)
        for jobs in self._placed.values():
            jobs.discard(key)
        self.metrics.forget(*key)
        self.executor.forget(key)

    @staticmethod
    async def _served(group: ServedGroup | None, wanted: bool, job: TrainingJob) -> bool:
        """Whether `group` is served; asked again (off the loop) only for a job that wants it
        while it was not: when due, and at once at a new job's first look (its first epoch's
        pods are about to be made with it or without it; a job held waiting, say for Kueue,
        asks only when due, not at each of its reconciles)."""
        if group is None or not wanted or group.served:
            return group is not None and group.served
        first = job.status is None
        if first or group.due():
            return await asyncio.to_thread(group.refresh, first)
        return False

    async def reconcile(
        self, key: JobKey, body: Mapping[str, Any], pods: JobIndex[PodView],
        leases: JobIndex[LeaseFacts], nodes: Any, workloads: Any = None,
    ) -> float | None:  # fmt: skip
        """One observe -> plan -> execute once a slot is free; returns seconds until the next
        one is due, or None: the job is gone (`JobGoneError`), its loop must stop."""
        if self._free is None:  # made on the loop that uses it
            self._free = asyncio.Semaphore(self._slots)
        queued = time.perf_counter()
        async with self._free:
            self.metrics.reconcile_part.labels("wait").observe(time.perf_counter() - queued)
            return await self._reconcile(key, body, pods, leases, nodes, workloads)

    async def _reconcile(
        self, key: JobKey, body: Mapping[str, Any], pods: JobIndex[PodView],
        leases: JobIndex[LeaseFacts], nodes: Any, workloads: Any,
    ) -> float | None:  # fmt: skip
        if not (pods.listed and leases.listed):
            # planned from no pods, it would make those it has again; from no Leases, it would
            # take its live ranks for silent
            return STALE_WAIT_SECONDS
        raw = dict(body)
        version = raw["metadata"]["resourceVersion"]
        if self._stale_version.get(key) == version:
            return STALE_WAIT_SECONDS  # our last write has not reached the watch yet
        try:
            job = TrainingJob.from_stored(raw)
        except ValidationError as error:
            log.error("TrainingJob %s/%s cannot be read: %s", *key, error)
            return self.resync_seconds
        refused = self._refused.get(key)
        lease = observe.merged(leases.get(key, ()))
        views = tuple(v for v in pods.get(key, ()) if v is not None)
        self.executor.seen(key, {v.name for v in views}, {v.name for v in views if v.deleting})
        observed = Observed(
            pods=observe.with_reports(views, lease.reports) if lease else views,
            nodes=self._nodes_by_name(nodes.get(None, ())),
            heartbeat=lease.heartbeat if lease else None,
            heartbeat_renewed=lease.renewed if lease else None,
            podgroups_supported=await self._served(self.podgroups, job.spec.gang, job),
            workloads_supported=await self._served(
                self.kueue, bool((job.metadata.labels or {}).get(labels.KUEUE_QUEUE)), job
            ),
            workloads=tuple((workloads or {}).get(key, ())),
            refused=refused,
        )
        started = time.perf_counter()
        now = datetime.now(UTC)
        observed = self._with_late_acks(key, job, observed, now)
        decided = plan(job, observed, now, self.config)
        planned = time.perf_counter()
        self.metrics.reconcile_part.labels("plan").observe(planned - started)
        executor = self.executor.for_job(raw, job)

        def execute() -> Applied:
            began, api_before = time.perf_counter(), self.executor.api_seconds()
            if not self.may_act():
                raise NotLeadingError()
            try:
                return executor.apply(decided, now)
            finally:
                ended, api = time.perf_counter(), self.executor.api_seconds() - api_before
                self.metrics.reconcile_part.labels("execute").observe(ended - began)
                self.metrics.reconcile_part.labels("api").observe(api)
                self.metrics.reconcile_part.labels("own").observe(ended - started - api)
                self._own[key] = ended - started - api

        try:
            applied = await asyncio.get_running_loop().run_in_executor(self._pool, execute)
        except StatusConflictError:
            return CONFLICT_RETRY_SECONDS
        except JobGoneError:
            log.info("TrainingJob %s/%s is gone; its loop stops", *key)
            return None
        except NotLeadingError:
            log.warning("not carrying out the plan of %s/%s: the leader Lease is not renewed", *key)
            return STALE_WAIT_SECONDS
        finally:
            self.metrics.reconcile.observe(time.perf_counter() - started)
        written = applied.written
        if written is not None and written != version:  # a no-op write leaves the version as is
            self._stale_version[key] = version
        if applied.refused is not None:
            self._refused[key] = applied.refused
            return 0  # the next plan records it
        if refused is not None:
            self._refused.pop(key, None)  # this plan recorded it in the status it wrote
        return min(decided.requeue_after or self.resync_seconds, self.resync_seconds)


def register(
    registry: kopf.OperatorRegistry,
    reconciler: Reconciler,
    connection: Callable[[], kopf.AiohttpSession],
    pods: PodWatch,
    leases: LeaseWatch,
) -> JobLoops:
    """Attach Phalanx's handlers to `registry`; the jobs' pods come from `pods`, whose changes
    must reach `reconciler.pod_changed`, and their Leases from `leases`, whose changes must
    reach `reconciler.poke`. The jobs' loops, to close when the operator stops."""
    kopf_indices: dict[str, Any] = {}
    """kopf's indices, as it hands them to the handlers (the same objects each time)."""

    async def step(key: JobKey, body: Mapping[str, Any]) -> float | None:
        nodes, workloads = kopf_indices["all_nodes"], kopf_indices.get("workloads_by_job")
        return await reconciler.reconcile(key, body, pods.index, leases.index, nodes, workloads)

    loops = JobLoops(reconciler, step)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.WARNING
        settings.watching.server_timeout = 300
        settings.persistence.finalizer = FINALIZER
        settings.persistence.diffbase_storage = SpecDiffBaseStorage()
        settings.persistence.progress_storage = AnnotationProgressStorage()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.AiohttpSession:
        return connection()  # on the loop: the session binds to it

    @kopf.index(
        KUEUE_GROUP, KUEUE_VERSION, WORKLOAD_PLURAL, id="workloads_by_job",
        labels={labels.JOB: kopf.PRESENT}, registry=registry,
    )  # fmt: skip
    async def workloads_by_job(
        namespace: str | None, body: kopf.Body, **_: Any
    ) -> dict[JobKey, Any]:
        key = (namespace or "", body.metadata.labels.get(labels.JOB, ""))
        reconciler.poke(key)
        return {key: observe.workload_view(body)}

    @kopf.index("nodes", id="all_nodes", registry=registry)
    async def all_nodes(body: kopf.Body, **_: Any) -> dict[None, Any]:
        view = observe.node_view(body, reconciler.unhealthy_node_labels)
        reconciler.node_seen(view)
        return {None: view}

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def job_changed(namespace: str | None, name: str, body: kopf.Body, **kwargs: Any) -> None:
        # kopf calls no other handler before every index is filled: no job is planned from a
        # partial list of the nodes or Workloads
        kopf_indices.update(
            all_nodes=kwargs["all_nodes"], workloads_by_job=kwargs.get("workloads_by_job")
        )
        loops.seen((namespace or "", name), dict(body), deleted=kwargs.get("type") == "DELETED")

    return loops
