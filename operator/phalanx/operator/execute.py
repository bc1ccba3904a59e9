"""Apply a plan to the cluster, idempotently: status first (with optimistic concurrency), then
deletions and creations (404 and 409 tolerated), then events.

Why this order: the status write records the epoch before any of its pods exist, so an operator
killed half-way resumes the same epoch from status, and deterministic pod names make a repeated
create a no-op. No epoch is skipped or repeated, and no pod is duplicated.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.job import GROUP, PLURAL, VERSION, TrainingJob
from phalanx.operator import builder
from phalanx.operator.builder.children import PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSION
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import (
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    DeletePods,
    EmitEvent,
    EnsureChildren,
    EnsurePodGroup,
    ObserveRecovery,
    PatchStatus,
    Plan,
)

log = logging.getLogger(__name__)
COMPONENT = "phalanx-operator"


class StatusConflictError(Exception):
    """The job changed since it was read; the reconcile must start again from fresh state."""


def _tolerate(error: ApiException, *codes: int) -> None:
    if error.status not in codes:
        raise error


class Executor:
    """Carries out plans with a `kubernetes` client. Used from worker threads."""

    def __init__(
        self, api: k8s.ApiClient, build: builder.BuildSettings, metrics: OperatorMetrics
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.rbac = k8s.RbacAuthorizationV1Api(api)
        self.coordination = k8s.CoordinationV1Api(api)
        self.build = build
        self.metrics = metrics
        self.instance = socket.gethostname()

    def apply(self, raw: Mapping[str, Any], job: TrainingJob, plan: Plan) -> str | None:
        """Carry out `plan` for the job read as `raw`; returns the resourceVersion it wrote."""
        written = None
        for write in plan.of_type(PatchStatus):
            written = self._write_status(raw, job, write)
        uses_podgroup = bool(plan.of_type(EnsurePodGroup))
        for action in plan.actions:
            match action:
                case DeletePods(names=names):
                    self._delete_pods(job, names)
                case EnsureChildren():
                    self._ensure_children(job)
                case EnsurePodGroup(epoch=epoch, min_member=size):
                    self._create_custom(job, builder.pod_group(job, epoch, size))
                case CreateNodePod(epoch=epoch, rank=rank, nodes=nodes, avoid_nodes=avoid):
                    pod = builder.node_pod(
                        job, epoch, rank, nodes, self.build, avoid, uses_podgroup
                    )
                    self._create(lambda body: self.core.create_namespaced_pod(_ns(job), body), pod)
                case CreateStandbyPod(epoch=epoch, index=index, avoid_nodes=avoid):
                    pod = builder.standby_pod(job, epoch, index, self.build, avoid)
                    self._create(lambda body: self.core.create_namespaced_pod(_ns(job), body), pod)
                case ObserveRecovery(seconds=seconds, failure_class=failure_class):
                    self.metrics.recovery.labels(failure_class).observe(seconds)
                case DeleteJob():
                    self._delete_job(job)
        for event in plan.of_type(EmitEvent):
            self._emit(job, raw, event)
        return written

    def _write_status(self, raw: Mapping[str, Any], job: TrainingJob, write: PatchStatus) -> str:
        body = {**raw, "status": write.status.to_wire()}
        try:
            result = self.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, _ns(job), PLURAL, job.metadata.name or "", body
            )
        except ApiException as error:
            if error.status in (404, 409):
                raise StatusConflictError(str(error.reason)) from error
            raise
        self.metrics.job_status(_ns(job), job.metadata.name or "", job.status, write.status)
        return str(cast(dict[str, Any], result)["metadata"]["resourceVersion"])

    def _create(self, create: Any, manifest: dict[str, Any]) -> None:
        try:
            create(manifest)
        except ApiException as error:
            _tolerate(error, 409)

    def _create_custom(self, job: TrainingJob, manifest: dict[str, Any]) -> None:
        self._create(
            lambda body: self.custom.create_namespaced_custom_object(
                PODGROUP_GROUP, PODGROUP_VERSION, _ns(job), PODGROUP_PLURAL, body
            ),
            manifest,
        )

    def _ensure_children(self, job: TrainingJob) -> None:
        ns = _ns(job)
        self._create(
            lambda b: self.core.create_namespaced_service(ns, b),
            builder.headless_service(job, self.build.master_port),
        )
        self._create(
            lambda b: self.core.create_namespaced_service_account(ns, b),
            builder.service_account(job),
        )
        self._create(lambda b: self.rbac.create_namespaced_role(ns, b), builder.role(job))
        self._create(
            lambda b: self.rbac.create_namespaced_role_binding(ns, b), builder.role_binding(job)
        )
        self._create(
            lambda b: self.coordination.create_namespaced_lease(ns, b), builder.heartbeat_lease(job)
        )

    def _delete_pods(self, job: TrainingJob, names: tuple[str, ...]) -> None:
        for name in names:
            try:
                self.core.delete_namespaced_pod(name, _ns(job))
            except ApiException as error:
                _tolerate(error, 404)

    def _delete_job(self, job: TrainingJob) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                _ns(job),
                PLURAL,
                job.metadata.name or "",
                propagation_policy="Background",
            )
        except ApiException as error:
            _tolerate(error, 404)

    def _emit(self, job: TrainingJob, raw: Mapping[str, Any], event: EmitEvent) -> None:
        now = datetime.now(UTC)
        meta = raw.get("metadata", {})
        body = {
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": _ns(job)},
            "involvedObject": {
                "apiVersion": raw.get("apiVersion"),
                "kind": raw.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "reason": event.reason,
            "message": event.message[:1024],
            "type": event.type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now.isoformat(),
            "lastTimestamp": now.isoformat(),
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(_ns(job), cast(Any, body))
        except ApiException as error:  # an event is a courtesy; never fail a reconcile for it
            log.warning(
                "could not emit event %s for %s: %s", event.reason, meta.get("name"), error.reason
            )


def _ns(job: TrainingJob) -> str:
    return job.metadata.namespace or "default"
