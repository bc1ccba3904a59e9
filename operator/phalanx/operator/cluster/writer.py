"""The requests that carry out a plan's actions for one job, idempotently: creates that tolerate
409, deletes that tolerate 404, many at once where none needs another (`slow_start`). What to
send is decided before (the executor, with the builders' manifests); what it already sent and the
watch has not shown yet is remembered there too (`expectations`).

A create the API server refuses for good (422, a pod PodSecurity does not admit) raises
`answers.ChildRefusedError`, which the executor turns into the plan's `ChildRefusal`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models import labels
from phalanx.models.events import JobEvent
from phalanx.models.job import GROUP, PLURAL, VERSION, TrainingJob
from phalanx.models.status import TrainingJobStatus
from phalanx.operator import slow_start
from phalanx.operator.builder.children import PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION
from phalanx.operator.cluster import job_events, status_write, writes
from phalanx.operator.cluster.answers import discard, refusable, tolerate
from phalanx.operator.cluster.kube import ApiClient
from phalanx.operator.cluster.report_leases import drop_reports, grant_shards

Manifest = dict[str, Any]


class ClusterWriter:
    """The API requests of every job's plans, from worker threads: one client, and a pool that
    sends a batch's requests at once."""

    def __init__(self, api: ApiClient, instance: str) -> None:
        self.api = api
        self.instance = instance
        """This operator, as its events name it."""
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.rbac = k8s.RbacAuthorizationV1Api(api)
        self.coordination = k8s.CoordinationV1Api(api)
        self._pool = ThreadPoolExecutor(slow_start.MAX_IN_FLIGHT, "pod-create")
        """Sends a batch's requests, many at once (`slow_start`)."""

    def api_seconds(self) -> float:
        """Seconds the calling thread's requests have waited for the API server, all told (0
        with a client that does not count them)."""
        spent: Callable[[], float] | None = getattr(self.api, "spent", None)
        return spent() if spent is not None else 0.0

    def write_status(
        self, raw: Mapping[str, Any], job: TrainingJob, status: TrainingJobStatus
    ) -> str:
        """The job's status replaced (`status_write`); its new resourceVersion."""
        return status_write.replace(self.custom, raw, job, status)

    def emit(self, raw: Mapping[str, Any], event: JobEvent, now: datetime) -> None:
        """One of the plan's events on the job."""
        job_events.emit(self.api, raw, event, now, self.instance)

    def create(self, job: TrainingJob, manifest: Manifest) -> bool:
        """Create if absent (409 is success: returns False, it existed); a refusal of the object
        itself (422, or a pod PodSecurity admission does not admit) raises ChildRefusedError."""
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            refusable(job, kind, name, lambda: writes.create(self.api, _ns(job), manifest))
        except ApiException as error:
            tolerate(error, 409)
            return False
        return True

    def create_all(self, creates: Sequence[Callable[[], Any]]) -> None:
        """Each of `creates` (one object each), in batches that grow while they succeed."""
        slow_start.run(list(creates), self._pool, self._waited)

    def apply(self, job: TrainingJob, manifest: Manifest) -> None:
        """A server-side apply of `manifest`: made, or made so, in one request."""
        apply = partial(writes.apply, self.api, _ns(job), manifest, writes.FIELD_MANAGER)
        refusable(job, manifest["kind"], manifest["metadata"]["name"], apply)

    def ensure_pod_group(self, job: TrainingJob, manifest: Manifest, min_member: int) -> None:
        """The job's PodGroup, created once; its minMember set to the epoch's size after."""
        args = (PODGROUP_GROUP, PODGROUP_VERSION, _ns(job), PODGROUP_PLURAL)
        if not self.create(job, manifest):
            self.custom.patch_namespaced_custom_object(
                *args, manifest["metadata"]["name"], {"spec": {"minMember": min_member}}
            )

    def ensure_children(
        self, job: TrainingJob, children: Sequence[Manifest], reports: Sequence[Manifest]
    ) -> None:
        """The job's `children`, all at once: none needs another to exist (a RoleBinding names
        its Role and account, and the pods that need the account come after); one after
        another, a new job's first reconcile waited six round trips before its first pod. A Role
        that existed is made to grant the job's report shards. Then its report Leases, in
        batches, as the pods go (one per rank past the first 8)."""

        def ensure(manifest: Manifest) -> None:
            if not self.create(job, manifest) and manifest["kind"] == "Role":
                grant_shards(self.rbac, job)

        together = [partial(ensure, child) for child in children]
        slow_start.together(together, self._pool, self._waited)
        self.create_all([partial(self.create, job, m) for m in reports])

    def publish(self, job: TrainingJob, lease: Manifest, value: str, first: bool) -> None:
        """The epoch's assignment `value` on the job's assignment Lease. The Lease is made with
        the job's `first` publication in this operator's life (one write, not a create and a
        patch; after a restart, one 409); else patched, and made again if deleted since."""
        if first and self.create(job, lease):
            return
        body = {"metadata": {"annotations": {labels.ASSIGNMENT: value}}}
        name = lease["metadata"]["name"]
        try:
            patch = self.coordination.patch_namespaced_lease
            discard(patch(name, _ns(job), body, _preload_content=False))
        except ApiException as error:
            tolerate(error, 404)
            self.create(job, lease)

    def delete_pods(
        self, job: TrainingJob, names: Sequence[str], grace: int | None, reported: Sequence[str]
    ) -> None:
        """The pods `names`, at once (404 is success), and the report Leases of those that
        `reported`."""

        def delete(name: str) -> None:
            try:
                discard(
                    self.core.delete_namespaced_pod(
                        name, _ns(job), grace_period_seconds=grace, _preload_content=False
                    )
                )
            except ApiException as error:
                tolerate(error, 404)

        slow_start.together([partial(delete, n) for n in names], self._pool, self._waited)
        drop_reports(self.coordination, job, tuple(reported))

    def delete_job(self, job: TrainingJob) -> None:
        """The job itself, its children by garbage collection (404 is success)."""
        name, background = job.metadata.name or "", "Background"
        try:
            delete = self.custom.delete_namespaced_custom_object
            delete(GROUP, VERSION, _ns(job), PLURAL, name, propagation_policy=background)
        except ApiException as error:
            tolerate(error, 404)

    def _waited(self, seconds: float) -> None:
        """A batch of requests on other threads was waited for: the API server's time."""
        count: Callable[[float], None] | None = getattr(self.api, "count", None)
        if count is not None:
            count(seconds)


def _ns(job: TrainingJob) -> str:
    return job.metadata.namespace or "default"
