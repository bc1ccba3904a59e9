"""The operator's side of Kueue's contract for a job kind it does not know (see
`planner.queueing`): create the job's Workload, keep its spec.active in step with the job's
suspend, hand an evicted Workload's quota back once the job's pods stopped, and mark it Finished
when the job ends. Kueue's own integrations do the same through its Go job framework; this is
that protocol over the API: a status replace with the object's resourceVersion, so that a
concurrent write by Kueue is never overwritten (a conflict raises, and the next reconcile
decides again from fresh state)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.job import TrainingJob
from phalanx.operator.builder.env import BuildSettings
from phalanx.operator.builder.workload import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    WORKLOAD_PLURAL,
    workload,
)
from phalanx.operator.planner.actions import EnsureWorkload

Manifest = dict[str, Any]


REQUEUED_AFTER = frozenset({"Preempted", "NodeFailures"})
"""Evictions after which Kueue's own integrations mark the Workload Requeued=True (at once back
in its queue); after the others (deactivated, a waitForPodsReady timeout) Requeued=False."""


class Workloads:
    """Workload calls for every job; used from worker threads."""

    def __init__(self, api: k8s.ApiClient, build: BuildSettings) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.scheduling = k8s.SchedulingV1Api(api)
        self.build = build

    def ensure(self, job: TrainingJob, wanted: EnsureWorkload) -> None:
        """Create the job's Workload `wanted.name` if absent; else set its spec.active as
        wanted."""
        namespace, name = job.metadata.namespace or "", wanted.name
        manifest = workload(
            job,
            wanted.count,
            wanted.min_count,
            wanted.active,
            self.build,
            self._priority(job),
            wanted.epoch,
            wanted.snapshot_bytes,
        )
        try:
            self.custom.create_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, WORKLOAD_PLURAL, manifest
            )
        except ApiException as error:
            if error.status != 409:
                raise
            self.custom.patch_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, WORKLOAD_PLURAL, name,
                {"spec": {"active": wanted.active}},
            )  # fmt: skip

    def release_quota(self, job: TrainingJob, name: str, message: str) -> None:
        """The evicted Workload's admission cleared (its quota back to the ClusterQueue), and it
        pending again: Kueue may admit it anew, at whatever size its quota then allows."""

        def release(status: Manifest) -> None:
            reason = (_condition(status, "Evicted") or {}).get("reason") or "Evicted"
            requeued = "True" if reason in REQUEUED_AFTER else "False"
            _set(status, "Requeued", requeued, reason, message)
            status.pop("admission", None)
            _set(status, "QuotaReserved", "False", "Pending", message)
            _set(status, "Admitted", "False", "NoReservation", message)

        self._replace_status(job, name, release)

    def mark_pods_ready(self, job: TrainingJob, name: str, ready: bool) -> None:
        """The Workload's PodsReady condition, with Kueue's reasons: Started and WaitForStart
        before the pods were first ready, Recovered and WaitForRecovery after."""

        def mark(status: Manifest) -> None:
            was = _condition(status, "PodsReady")
            since_ready = was is not None and (
                was.get("status") == "True" or was.get("reason") == "WaitForRecovery"
            )
            if ready:
                reason = "Recovered" if since_ready else "Started"
                _set(status, "PodsReady", "True", reason, "every node pod of the epoch runs")
            else:
                reason = "WaitForRecovery" if since_ready else "WaitForStart"
                _set(
                    status,
                    "PodsReady",
                    "False",
                    reason,
                    "the epoch's node pods are not all running",
                )

        self._replace_status(job, name, mark)

    def finish(self, job: TrainingJob, name: str, message: str) -> None:
        """The Workload Finished, its quota free for good: the job ended, or the Workload is
        replaced or no longer wanted."""
        self._replace_status(
            job, name, lambda status: _set(status, "Finished", "True", "JobFinished", message)
        )

    def _replace_status(self, job: TrainingJob, name: str, change: Any) -> None:
        namespace = job.metadata.namespace or ""
        body = cast(Manifest, self.custom.get_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, WORKLOAD_PLURAL, name
        ))  # fmt: skip
        status = body.setdefault("status", {})
        change(status)
        self.custom.replace_namespaced_custom_object_status(
            KUEUE_GROUP, KUEUE_VERSION, namespace, WORKLOAD_PLURAL, name, body
        )

    def _priority(self, job: TrainingJob) -> int | None:
        """The value of the job's priorityClassName (Kueue orders and preempts by it)."""
        if not job.spec.priority_class_name:
            return None
        found = self.scheduling.read_priority_class(job.spec.priority_class_name)
        return int(found.value or 0)


def _condition(status: Manifest, kind: str) -> Manifest | None:
    found: Manifest | None = next(
        (c for c in status.get("conditions") or [] if c.get("type") == kind), None
    )
    return found


def _set(status: Manifest, kind: str, value: str, reason: str, message: str) -> None:
    """Set a condition of `status`; its transition time moves only when its value does."""
    conditions: list[Manifest] = status.setdefault("conditions", [])
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for condition in conditions:
        if condition.get("type") == kind:
            if condition.get("status") != value:
                condition["lastTransitionTime"] = now
            condition.update(status=value, reason=reason, message=message[:32768])
            return
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": now})  # fmt: skip
