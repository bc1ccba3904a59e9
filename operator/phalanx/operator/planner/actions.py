"""What the planner can ask for, and what an executor owes it: applying each, idempotently.

Why data, not calls: the planner stays pure, tests assert on the list, and the operator and the
local backend each execute the same decisions their own way (see `Executor`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypeVar

from phalanx.models.events import JobEvent
from phalanx.models.heartbeat import Resume
from phalanx.models.status import TrainingJobStatus

T = TypeVar("T")


@dataclass(frozen=True)
class EnsureChildren:
    """Create, if absent, the headless Service, ServiceAccount, Role, RoleBinding and Leases,
    for the launch of epoch `epoch` (the executor makes them once per job and report shard
    count: `Executor._ensure_children`)."""

    epoch: int = 0


@dataclass(frozen=True)
class EnsurePodGroup:
    """Create, if absent, the job's PodGroup, and make its minMember the epoch's node count."""

    min_member: int


@dataclass(frozen=True)
class EnsureWorkload:
    """Create, if absent, the Kueue Workload `name` of the job, asked for in `epoch` (0: the
    job's first; later: to grow past a partial admission): one pod set of `count` pods shaped
    like the job's node pod, at least `min_count` of them (Kueue's partial admission); and make
    its spec.active `active` (False while the job is suspended: Kueue evicts it and frees its
    quota, and admits it no more until it is active again)."""

    name: str
    count: int
    min_count: int
    active: bool = True
    epoch: int = 0
    snapshot_bytes: int = 0
    """As CreateNodePod's: Kueue counts the memory the pods will request."""


@dataclass(frozen=True)
class ReleaseQuota:
    """Hand back the quota of the job's evicted Workload `name`: its pods have all stopped
    (Kueue's contract with a job's controller: the admission is cleared only then)."""

    name: str
    message: str


@dataclass(frozen=True)
class MarkPodsReady:
    """Tell Kueue whether every node pod of the admitted job runs (the PodsReady condition of
    its Workload `name`, which Kueue's waitForPodsReady timeouts read)."""

    name: str
    ready: bool


@dataclass(frozen=True)
class FinishWorkload:
    """Mark the job's Workload `name` Finished, its quota free for good: the job ended, a
    Workload admitted later for more pods replaces it, or a request to grow is withdrawn."""

    name: str
    message: str


@dataclass(frozen=True)
class CreateNodePod:
    """Create node pod `rank` of `epoch`, one of `nodes`."""

    epoch: int
    rank: int
    nodes: int
    avoid_nodes: tuple[str, ...] = ()
    master: str | None = None
    """The pod that is rank 0 when it carried over from an earlier epoch (rendezvous there);
    None: rank 0 is the epoch's own `<job>-<epoch>-0`."""
    agent: bool = True
    """Whether the pod may get the injected agent (False once it could not run in the image)."""
    snapshot_bytes: int = 0
    """Host memory the pod's memory snapshots hold (`memory.snapshot_request`), added to its
    trainer container's memory: the planner's figure, so that the builders decide nothing."""


@dataclass(frozen=True)
class CreateStandbyPod:
    """Create standby pod `index` of `epoch`: it holds capacity until the job can grow, and
    when `warm` its agent stands by to take a lost rank in place (a hot spare)."""

    epoch: int
    index: int
    avoid_nodes: tuple[str, ...] = ()
    warm: bool = False
    nodes: int = 1
    """The job's size the warm pod's env names until an assignment gives it a rank (its
    target size: the builders decide nothing)."""
    snapshot_bytes: int = 0
    """As CreateNodePod's: a standby holds a node pod's capacity, snapshots included."""


@dataclass(frozen=True)
class AssignEpoch:
    """Publish who runs `epoch`: node rank by pod name, carried-over pods and new ones alike.
    Agents that take new epochs in place start it at once; the executor picks the rendezvous."""

    epoch: int
    nodes: int
    ranks: tuple[tuple[str, int], ...]
    """(pod name, node rank), by rank."""


@dataclass(frozen=True)
class DeletePods:
    """Delete these pods (with their grace period, so agents can checkpoint), or with `force`
    at once: for pods on a lost node, whose kubelet can never confirm a graceful deletion."""

    names: tuple[str, ...]
    force: bool = False
    reported: tuple[str, ...] = ()
    """Those of `names` whose agent's report is on the heartbeat Lease: it goes with them. A
    pod without one costs no Lease write (a storm of jobs whose pods run no agent spent a
    share of its requests on such patches: docs/figures.md, "Requests")."""


@dataclass(frozen=True)
class PatchStatus:
    """Replace the job's status; written once per reconcile, only when it changed."""

    status: TrainingJobStatus


@dataclass(frozen=True)
class EmitEvent:
    """Tell the job's user of `event` (a Kubernetes Event on a cluster), after the status write.
    The event has no time yet: it happens when the executor applies the plan."""

    event: JobEvent


@dataclass(frozen=True)
class ObserveRecovery:
    """A failure was recovered from: failure seen -> the new epoch's first training step (or
    its pods running: `until`) took `seconds`."""

    seconds: float
    failure_class: str
    parts: tuple[tuple[str, float], ...] = ()
    """Where the time went, in order (see `planner.timeline`), when the epoch reported it."""
    resumed: Resume | None = None
    """What the new epoch resumed from, when it reported it."""
    redone_steps: int | None = None
    """Steps trained again: the last step seen before the failure less the step resumed from
    (at least that many; the heartbeat lags the trainer by up to a period)."""
    epoch: int = 0
    """The epoch that resumed."""
    until: Literal["first-step", "pods-running"] = "first-step"
    """What `seconds` reach: the new epoch's first training step, or, for a program that
    reports no steps, its pods all running (no first step can be seen)."""


@dataclass(frozen=True)
class DeleteJob:
    """Delete the TrainingJob itself (TTL after finishing); its children follow by owner refs."""


Action = (
    EnsureChildren
    | EnsurePodGroup
    | EnsureWorkload
    | ReleaseQuota
    | MarkPodsReady
    | FinishWorkload
    | CreateNodePod
    | CreateStandbyPod
    | AssignEpoch
    | DeletePods
    | PatchStatus
    | EmitEvent
    | ObserveRecovery
    | DeleteJob
)


@dataclass
class Plan:
    """The decisions of one reconcile, and when to look again if nothing else happens."""

    actions: list[Action] = field(default_factory=list)
    requeue_after: float | None = None
    """Seconds until the next reconcile is due; None means only on events."""

    def of_type(self, kind: type[T]) -> list[T]:
        """The actions of one kind, in order."""
        return [a for a in self.actions if isinstance(a, kind)]

    @property
    def events(self) -> list[JobEvent]:
        """The events to emit, in order."""
        return [a.event for a in self.of_type(EmitEvent)]


class Executor(Protocol):
    """Carries out the plans of one job. Two do: the operator's on a cluster
    (`phalanx.operator.execute`, API calls) and the local backend's on this machine
    (`phalanx.local.executor`, processes).

    The contract, beyond the signature: every `Action` is either carried out, idempotently, or,
    where it has no meaning (a PodGroup on one machine), named as having none; the status write
    comes before the events. Each executor dispatches with a `match` over `Action` that ends in
    `typing.assert_never`, so that a new kind of action that one of them does not handle is a
    type error, not a decision silently dropped.
    """

    def apply(self, plan: Plan, now: datetime) -> object:
        """Carry out `plan`, decided at `now`; what it returns is for the caller (the cluster
        executor's `Applied`: the write's resourceVersion, a refused child)."""
