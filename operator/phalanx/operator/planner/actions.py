"""What the planner can ask for. The executor applies each one idempotently.

Why data, not calls: the planner stays pure, tests assert on the list, and the operator and the
local backend each execute the same decisions their own way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeVar

from phalanx.models.heartbeat import Resume
from phalanx.models.status import TrainingJobStatus

T = TypeVar("T")


@dataclass(frozen=True)
class EnsureChildren:
    """Create, if absent, the headless Service, ServiceAccount, Role, RoleBinding and Lease."""


@dataclass(frozen=True)
class EnsurePodGroup:
    """Create, if absent, the epoch's PodGroup with minMember = its node count."""

    epoch: int
    min_member: int


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


@dataclass(frozen=True)
class CreateStandbyPod:
    """Create standby pod `index` of `epoch`: it holds capacity until the job can grow, and
    when `warm` its agent stands by to take a lost rank in place (a hot spare)."""

    epoch: int
    index: int
    avoid_nodes: tuple[str, ...] = ()
    warm: bool = False


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


@dataclass(frozen=True)
class PatchStatus:
    """Replace the job's status; written once per reconcile, only when it changed."""

    status: TrainingJobStatus


@dataclass(frozen=True)
class EmitEvent:
    """A Kubernetes Event on the job, emitted after the status write."""

    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"


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
