"""Turn Kubernetes objects (as the watch delivers them) into the planner's views.

Why here and pure: the pod watch (`pod_watch`) and kopf's indices keep the latest pods, leases
and nodes in memory (no list per reconcile), and these functions reduce each object to what the
planner needs when it arrives.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from phalanx.models import labels
from phalanx.models.assignment import AgentReport
from phalanx.models.heartbeat import Heartbeat
from phalanx.operator.builder.workload import POD_SET
from phalanx.operator.planner import NodeView, PodView, WorkloadView, memory
from phalanx.operator.planner.observed import Role

log = logging.getLogger(__name__)
Body = Mapping[str, Any]


REPORTS_REMEMBERED = 4_096
"""Parsed agent reports kept (about 2 KiB each with their keys, so at most 8 MiB): the reports
of a few shards' worth of pods, which is what one Lease's change brings again."""
DEFAULT_GRACE_SECONDS = 30
"""Kubernetes' default terminationGracePeriodSeconds."""


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _condition(status: Body, kind: str) -> Body | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _containers(status: Body) -> list[Body]:
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _termination(status: Body) -> Body | None:
    """The terminated state that explains the pod: the first failure, else any termination."""
    terminated = [
        s["state"]["terminated"]
        for s in _containers(status)
        if (s.get("state") or {}).get("terminated")
    ]
    failed = [t for t in terminated if t.get("exitCode", 0) != 0]
    chosen: Body | None = (failed or terminated or [None])[0]
    return chosen


def _waiting(status: Body) -> Body | None:
    for s in _containers(status):
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            return dict(waiting)
    return None


def pod_view(pod: Body) -> PodView | None:
    """The planner's view of a pod of a job; None if it lacks Phalanx's labels."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status") or {}
    pod_labels = meta.get("labels") or {}
    try:
        epoch, rank = int(pod_labels[labels.EPOCH]), int(pod_labels[labels.NODE_RANK])
    except (KeyError, ValueError):
        return None
    terminated = _termination(status)
    waiting = _waiting(status)
    disruption = _condition(status, "DisruptionTarget")
    scheduling = _condition(status, "PodScheduled") or {}
    disrupted = disruption is not None and disruption.get("status") == "True"
    role: Role = "standby" if pod_labels.get(labels.ROLE) == labels.ROLE_STANDBY else "node"
    message = (terminated or {}).get("message") or (waiting or {}).get("message")
    return PodView(
        name=meta.get("name", ""),
        epoch=epoch,
        rank=rank,
        role=role,
        warm=role == "standby" and pod_labels.get(labels.WARM) == "true",
        agent_injected=(meta.get("annotations") or {}).get(labels.AGENT) == "injected",
        epoch_nodes=int(pod_labels[labels.NNODES])
        if pod_labels.get(labels.NNODES, "").isdigit()
        else None,
        phase=status.get("phase", "Pending"),
        node_name=spec.get("nodeName"),
        deleting=meta.get("deletionTimestamp") is not None,
        created=_time(meta.get("creationTimestamp")),
        exit_code=(terminated or {}).get("exitCode"),
        terminated_reason=(terminated or {}).get("reason"),
        pod_reason=status.get("reason"),
        disruption_reason=(disruption or {}).get("reason") or "DisruptionTarget"
        if disrupted
        else None,
        stop_deadline=_stop_deadline(meta, disruption if disrupted else None),
        waiting_reason=(waiting or {}).get("reason"),
        unschedulable=_unschedulable(scheduling, spec),
        message=(message or status.get("message") or None),
    )


def _unschedulable(scheduling: Body, spec: Body) -> str | None:
    """The scheduler's words for a pod it could not place (PodScheduled False); None for one
    it placed, or one held back by a scheduling gate (not the scheduler's refusal)."""
    if scheduling.get("status") != "False" or spec.get("nodeName"):
        return None
    if scheduling.get("reason") == "SchedulingGated":
        return None
    return str(scheduling.get("message") or scheduling.get("reason") or "Unschedulable")


def _stop_deadline(meta: Body, disruption: Body | None) -> datetime | None:
    """When a pod being stopped gracefully is killed: its deletionTimestamp (the deletion's
    time plus its grace period); while only a DisruptionTarget condition shows (the deletion
    follows it), that condition's time plus the default grace."""
    deadline = _time(meta.get("deletionTimestamp"))
    if deadline is None and disruption is not None:
        since = _time(disruption.get("lastTransitionTime"))
        deadline = since + timedelta(seconds=DEFAULT_GRACE_SECONDS) if since else None
    return deadline


def node_view(node: Body, unhealthy_labels: Mapping[str, frozenset[str]] | None = None) -> NodeView:
    """A node, whether its Ready condition is True, its labels, and whether the cluster is
    taking it away (`leaving`)."""
    ready = _condition(node.get("status") or {}, "Ready")
    labels = node["metadata"].get("labels") or {}
    return NodeView(
        name=node["metadata"]["name"],
        ready=bool(ready and ready["status"] == "True"),
        labels=tuple(sorted(labels.items())),
        gpu_memory=memory.node_gpu_memory(labels),
        leaving=leaving(node, unhealthy_labels or {}),
    )


NODE_LIFECYCLE_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)
"""The node controller's own NoExecute taints: a NotReady node, which the planner sees as lost
(`Observed.on_lost_node`), not as one being drained."""


def leaving(node: Body, unhealthy_labels: Mapping[str, frozenset[str]]) -> str | None:
    """Why the cluster is taking `node` away while it runs, or None: cordoned (`kubectl cordon`,
    and `kubectl drain` before it evicts), tainted NoExecute by someone other than the node
    controller (a health checker such as NVSentinel, `node.kubernetes.io/out-of-service`), or
    carrying a label value the operator is told means unhealthy (`unhealthy_node_labels`, e.g.
    SageMaker HyperPod's node-health-status). Each is planned: the pods will be evicted."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return "cordoned"
    for taint in spec.get("taints") or ():
        if taint.get("effect") == "NoExecute" and taint.get("key") not in NODE_LIFECYCLE_TAINTS:
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"tainted {taint.get('key')}{value}:NoExecute"
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, values in unhealthy_labels.items():
        if labels.get(key) in values:
            return f"labelled {key}={labels[key]}"
    return None


def workload_view(workload: Body) -> WorkloadView:
    """What Kueue decided about a job's Workload: the pods admitted (its node pod set's count,
    the spec's where the admission gives none) while Admitted is True, an eviction while Evicted
    is True, whether an admission (quota) is still held, Finished, spec.active, PodsReady, and
    the job's epoch it was asked for in."""
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    admission = status.get("admission")
    evicted, ready = _condition(status, "Evicted"), _condition(status, "PodsReady")
    admitted = None
    if admission and _is_true(_condition(status, "Admitted")):
        sets = [*(admission.get("podSetAssignments") or []), *(spec.get("podSets") or [])]
        admitted = next((s["count"] for s in sets if s.get("name") == POD_SET and "count" in s),
                        None)  # fmt: skip
    requested = next((s.get("count") for s in spec.get("podSets") or []
                      if s.get("name") == POD_SET), None)  # fmt: skip
    return WorkloadView(
        name=workload["metadata"]["name"],
        admitted=admitted,
        requested=requested,
        evicted=f"{evicted.get('reason')}: {evicted.get('message', '')}".rstrip(": ")
        if _is_true(evicted) and evicted is not None
        else None,
        quota_reserved=admission is not None,
        finished=_is_true(_condition(status, "Finished")),
        active=spec.get("active", True) is not False,
        pods_ready=None if ready is None else _is_true(ready),
        epoch=_int_label(workload, labels.EPOCH),
    )


def _int_label(body: Body, key: str) -> int:
    """An integer label of `body`; 0 where it has none or it is no integer."""
    value = ((body.get("metadata") or {}).get("labels") or {}).get(key, "0")
    return int(value) if str(value).isdigit() else 0


def _is_true(condition: Body | None) -> bool:
    return condition is not None and condition.get("status") == "True"


@dataclass(frozen=True)
class LeaseFacts:
    """What the job's heartbeat Lease says: rank 0's heartbeat and each agent's report."""

    heartbeat: Heartbeat | None
    reports: Mapping[str, AgentReport]
    renewed: datetime | None = None
    """The Lease's spec.renewTime: when an agent last wrote the heartbeat."""


def lease_facts(lease: Body) -> LeaseFacts | None:
    """The heartbeat and the agents' reports on a Lease of a job; None if it has neither."""
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    reports = {}
    for key, raw in annotations.items():
        if key.startswith(labels.AGENT_REPORT_PREFIX) and (report := _report(key, raw)):
            reports[report.pod] = report
    beat = heartbeat(lease)
    if beat is None and not reports:
        return None
    return LeaseFacts(beat, reports, renew_time(lease))


@functools.lru_cache(maxsize=REPORTS_REMEMBERED)
def _report(key: str, raw: str) -> AgentReport | None:
    """One agent's report, parsed once: a change to a Lease of many reports (one agent's new
    state) brings all of them again, and the others are as they were."""
    try:
        return AgentReport.model_validate_json(raw)
    except ValidationError as error:
        log.warning("ignoring a malformed agent report %s: %s", key, error)
        return None


def merged(leases: Iterable[LeaseFacts]) -> LeaseFacts | None:
    """What a job's Leases say together: the heartbeat Lease (the one that carries the
    heartbeat and its renewal) and the report shards (`phalanx.models.report_shards`)."""
    facts = list(leases)
    if len(facts) < 2:
        return facts[0] if facts else None
    beating = next((f for f in facts if f.heartbeat is not None or f.renewed is not None), None)
    reports = {pod: report for f in facts for pod, report in f.reports.items()}
    if beating is None:
        return LeaseFacts(None, reports)
    return LeaseFacts(beating.heartbeat, reports, beating.renewed)


def renew_time(lease: Body) -> datetime | None:
    """The Lease's spec.renewTime; None if absent or malformed."""
    raw = (lease.get("spec") or {}).get("renewTime")
    if isinstance(raw, datetime):
        return raw
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None


def with_reports(
    pods: tuple[PodView, ...], reports: Mapping[str, AgentReport]
) -> tuple[PodView, ...]:
    """Pod views with their agent's report, for pods whose agent follows assignments."""
    return tuple(p.but(agent=reports[p.name]) if p.name in reports else p for p in pods)


def heartbeat(lease: Body) -> Heartbeat | None:
    """The heartbeat in a job's Lease annotation; None if absent or malformed (logged)."""
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(labels.HEARTBEAT)
    if not raw:
        return None
    try:
        return Heartbeat.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as error:
        log.warning(
            "ignoring malformed heartbeat on lease %s: %s", lease["metadata"]["name"], error
        )
        return None
