"""The snapshot the planner decides from: a job's pods, their nodes, and its heartbeat.

Why plain views instead of Kubernetes objects: the planner must stay pure and testable with
tables, and the local backend fills the same views from local processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from phalanx.models.assignment import AgentReport
from phalanx.models.heartbeat import Heartbeat

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
Role = Literal["node", "standby"]


@dataclass(frozen=True)
class PodView:
    """What the planner needs to know about one pod of the job."""

    name: str
    epoch: int
    rank: int
    """Node rank for a node pod, index for a standby pod."""
    role: Role = "node"
    epoch_nodes: int | None = None
    """Node count of the pod's epoch (its `phalanx.dev/nnodes` label)."""
    phase: PodPhase = "Pending"
    node_name: str | None = None
    """The Kubernetes node it is bound to; None while unscheduled."""
    deleting: bool = False
    """deletionTimestamp is set."""
    created: datetime | None = None
    exit_code: int | None = None
    """Exit code of the first terminated container that failed (or 0)."""
    terminated_reason: str | None = None
    """e.g. OOMKilled, Error, Completed."""
    pod_reason: str | None = None
    """pod.status.reason, e.g. Evicted."""
    disruption_reason: str | None = None
    """Reason of a DisruptionTarget=True condition, e.g. EvictionByEvictionAPI."""
    stop_deadline: datetime | None = None
    """The pod is being stopped gracefully (deleted, preempted, evicted): when it is killed.
    Its agent passes SIGTERM on, and the workers of `phalanx.resume` save the step they reached
    and stop, every rank alike, within the grace."""
    waiting_reason: str | None = None
    """Reason of a waiting container, e.g. ImagePullBackOff."""
    unschedulable: str | None = None
    """Why the scheduler cannot place it, in its own words (its PodScheduled=False condition's
    message: '0/3 nodes are available: persistentvolumeclaim "data" not found. ...')."""
    message: str | None = None
    """Termination message or waiting message."""
    agent: AgentReport | None = None
    """What the pod's agent last reported. Present only for agents that take new epochs in place
    (the pod outlives a restart); None for pods that run one epoch and exit."""
    agent_injected: bool = False
    """The operator injected the agent in front of its command (`phalanx.dev/agent`)."""
    warm: bool = False
    """A standby pod that runs the job's agent (a hot spare); a cold one only holds capacity."""
    reported_failure: bool = False
    """Its agent reported that the workers of the pod's epoch failed (the pod itself runs on)."""
    awaiting_start: bool = False
    """Carried into the current epoch, running, and its agent has not yet said it started the
    epoch (`inplace.effective` shows it Pending meanwhile)."""

    def but(self, **changes: Any) -> PodView:
        """A copy with `changes`, as `dataclasses.replace` makes it, without running `__init__`
        again. Why: each reconcile of a large job makes two of these a pod (reports,
        carried-over pods), and `replace` was most of its time (docs/figures.md, "Large job")."""
        if unknown := changes.keys() - _POD_FIELDS:
            raise TypeError(f"PodView has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(PodView)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    @property
    def scheduled(self) -> bool:
        """Bound to a node."""
        return self.node_name is not None

    @property
    def failed(self) -> bool:
        """The pod failed, or its agent reported its workers' failure."""
        return self.phase == "Failed" or self.reported_failure

    @property
    def reusable(self) -> bool:
        """It can take a new epoch in place: its agent runs and answers."""
        return (
            self.agent is not None
            and self.phase == "Running"
            and not self.deleting
            and self.stop_deadline is None  # preempted: the deletion follows
        )


_POD_FIELDS = frozenset(f.name for f in fields(PodView))


@dataclass(frozen=True)
class NodeView:
    """A Kubernetes node of the cluster (the local backend: of its machines)."""

    name: str
    ready: bool
    labels: tuple[tuple[str, str], ...] = ()
    """Its labels, for a job's nodeSelector."""
    gpu_memory: int | None = None
    """Bytes of one of its GPUs, from its GPU labels (`memory.node_gpu_memory`), read once when
    the node is observed rather than on every reconcile of every job."""
    leaving: str | None = None
    """Why the cluster is taking the node away while it still runs (cordoned or being drained,
    tainted NoExecute, labelled unhealthy: `observe.leaving`), or None. A planned disruption:
    the job moves its ranks off the node before their pods are evicted."""


@dataclass(frozen=True)
class WorkloadView:
    """The job's Kueue Workload, as far as the planner needs it (`observe.workload_view`)."""

    name: str
    admitted: int | None = None
    """Pods Kueue admitted (the node pod set's count) while it is admitted; None otherwise."""
    requested: int | None = None
    """Pods the Workload asks for (its node pod set's spec count)."""
    evicted: str | None = None
    """Why Kueue evicts it (its Evicted condition's reason and message) while that is True."""
    quota_reserved: bool = False
    """Its status still holds an admission (quota): handed back once the job's pods stopped."""
    finished: bool = False
    """Its Finished condition is True: the quota is released for good."""
    active: bool = True
    """Its spec.active: False while the job is suspended."""
    pods_ready: bool | None = None
    """Its PodsReady condition (None while it has none)."""
    epoch: int = 0
    """The job's epoch it was asked for in (its epoch label): 0 for the job's first Workload,
    later for one asked for to grow past a partial admission."""


@dataclass(frozen=True)
class ChildRefusal:
    """The API server refused to create one of the job's objects: as Invalid (HTTP 422), with an
    unknown field (400) or by admission (403). A configuration error either way, named in the
    job's condition; a lasting one is not retried for the same spec."""

    kind: str
    """Kind of the refused object: Pod, Service, ServiceAccount, Role, RoleBinding, Lease..."""
    name: str
    message: str
    """The API server's words (its Status message), which name the offending field."""
    generation: int | None
    """The job's spec generation the object was built from."""
    lasting: bool = True
    """Refused until the spec changes (Invalid, an unknown field, PodSecurity); False: refused
    until an object the spec names exists (a ServiceAccount), so creating is tried again."""


@dataclass(frozen=True)
class Observed:
    """Everything the planner sees of a job's world at one instant."""

    pods: tuple[PodView, ...] = ()
    nodes: Mapping[str, NodeView] = field(default_factory=dict)
    heartbeat: Heartbeat | None = None
    heartbeat_renewed: datetime | None = None
    """When rank 0's agent last renewed the heartbeat Lease (its spec.renewTime): it renews every
    heartbeat period whether or not the step moved, so a step that stands still while renewals
    come is a hang, and one that stands still while none come is a channel that is down (an API
    server away): no evidence of a hang. None where no Lease carries it (the local backend)."""
    podgroups_supported: bool = False
    workloads_supported: bool = False
    """The cluster serves Kueue's Workloads (kueue.x-k8s.io)."""
    workloads: tuple[WorkloadView, ...] = ()
    """The job's Kueue Workloads: its first, and any asked for later to grow
    (`queueing.sort_out` tells which one admits the job now)."""
    refused: ChildRefusal | None = None
    """What the executor was refused since the planner last looked; the status keeps it after."""
    late_acks_at: datetime | None = None
    """When the operator last saw an acknowledgement of any job's new epoch arrive late
    (`congestion.LateAcknowledgements`): the agents' reports are behind, and a silence is no
    evidence of a dead agent yet. None where nothing was late (and on the local backend)."""

    def node_pods(self, epoch: int) -> dict[int, PodView]:
        """Node pods of `epoch` by rank."""
        return {p.rank: p for p in self.pods if p.role == "node" and p.epoch == epoch}

    def standby_pods(self, epoch: int) -> list[PodView]:
        """Standby pods of `epoch`."""
        return [p for p in self.pods if p.role == "standby" and p.epoch == epoch]

    def stale_pods(self, epoch: int) -> list[PodView]:
        """Pods of earlier epochs (of either role)."""
        return [p for p in self.pods if p.epoch < epoch]

    def on_lost_node(self, pod: PodView) -> bool:
        """Bound to a node that is not Ready: its kubelet cannot confirm a graceful deletion, so
        the pod would stay Terminating until the node came back."""
        node = self.nodes.get(pod.node_name) if pod.node_name else None
        return node is not None and not node.ready

    def leaving(self, pod: PodView) -> str | None:
        """Why the node `pod` is bound to is being taken away (`NodeView.leaving`), or None."""
        node = self.nodes.get(pod.node_name) if pod.node_name else None
        return node.leaving if node is not None and node.ready else None

    def newest_epoch(self) -> int:
        """The highest epoch label among the pods, 0 if there are none."""
        return max((p.epoch for p in self.pods), default=0)


__all__ = [
    "ChildRefusal", "Heartbeat", "NodeView", "Observed", "PodPhase", "PodView", "Role",
    "WorkloadView",
]  # fmt: skip
