"""Carry out the planner's decisions on the local cluster: the operator's executor, for processes.

Status goes to the in-memory job (the run's only copy), pods to `LocalCluster`, events and
recovery times to the run's record. Children, PodGroups and TTL deletion have no local meaning.
Pods get the names a cluster would give them (`phalanx.models.names`). No API server can refuse
one, so `Observed.refused` stays empty here: locally, a configuration error is a command that
cannot start (the pod's CreateContainerError), which the same planner turns into the same
ConfigurationError condition, and the run ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from phalanx.local.cluster import LocalCluster, LocalPod
from phalanx.local.launch import Workdir, free_port, node_launch
from phalanx.models.job import TrainingJob
from phalanx.models.names import node_pod_name, standby_pod_name
from phalanx.operator.planner import (
    CreateNodePod,
    CreateStandbyPod,
    DeletePods,
    EmitEvent,
    ObserveRecovery,
    PatchStatus,
    Plan,
)


@dataclass(frozen=True)
class Event:
    """A decision worth telling the user, with when it happened."""

    time: datetime
    reason: str
    message: str
    type: str = "Normal"


@dataclass
class LocalExecutor:
    """Applies plans to `cluster` for `job`, keeping the job's status and the run's record."""

    job: TrainingJob
    cluster: LocalCluster
    workdir: Workdir
    run_id: str
    heartbeat_seconds: float
    on_event: Callable[[Event], None] = lambda _: None
    events: list[Event] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)
    _ports: dict[int, int] = field(default_factory=dict)

    def apply(self, plan: Plan, now: datetime) -> None:
        for action in plan.actions:
            match action:
                case PatchStatus(status=status):
                    self.job = self.job.model_copy(update={"status": status})
                case DeletePods(names=names):  # force too: a lost node's processes are dead
                    for name in names:
                        self.cluster.delete(name)
                case CreateNodePod(epoch=epoch, rank=rank, nodes=nodes):
                    self._create_node_pod(epoch, rank, nodes, now)
                case CreateStandbyPod(epoch=epoch, index=index):
                    name = standby_pod_name(self.job.metadata.name or "job", epoch, index)
                    self.cluster.create(LocalPod(name, epoch, index, "standby", 0, now))
                case ObserveRecovery(seconds=seconds):
                    self.recoveries.append(round(seconds, 3))
                case EmitEvent(reason=reason, message=message, type=kind):
                    self.record(Event(now, reason, message, kind))
                case _:  # children, PodGroups, TTL deletion: nothing to do on one machine
                    pass

    def record(self, event: Event) -> None:
        self.events.append(event)
        self.on_event(event)

    def _create_node_pod(self, epoch: int, rank: int, nodes: int, now: datetime) -> None:
        name = node_pod_name(self.job.metadata.name or "job", epoch, rank)
        if name in self.cluster.pods:
            return
        port = self._ports.setdefault(epoch, free_port())  # a fresh rendezvous per epoch
        launch = node_launch(
            self.job, epoch, rank, nodes, port, self.workdir, self.run_id, self.heartbeat_seconds
        )
        self.cluster.create(LocalPod(name, epoch, rank, "node", nodes, now, launch))
