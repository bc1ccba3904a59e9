"""Carry out the planner's decisions on the local cluster: the operator's executor, for processes.

Status goes to the in-memory job (the run's only copy), pods to `LocalCluster`, events (as they
happen: `JobEvent`s with their time) and recovery times to the run's record. Children, PodGroups
and TTL deletion have no local meaning.
Pods get the names a cluster would give them (`phalanx.models.names`). No API server can refuse
one, so `Observed.refused` stays empty here: locally, a configuration error is a command that
cannot start (the pod's CreateContainerError), which the same planner turns into the same
ConfigurationError condition, and the run ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import assert_never

from phalanx.local.cluster import LocalCluster, LocalPod
from phalanx.local.launch import LOOPBACK, Workdir, free_port, node_launch, runs_agent
from phalanx.local.summary import Recovery
from phalanx.models import env
from phalanx.models.assignment import EpochAssignment
from phalanx.models.events import JobEvent
from phalanx.models.job import TrainingJob
from phalanx.models.names import node_pod_name, standby_pod_name
from phalanx.operator.planner import (
    AssignEpoch,
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    DeletePods,
    EmitEvent,
    EnsureChildren,
    EnsurePodGroup,
    EnsureWorkload,
    Executor,
    FinishWorkload,
    MarkPodsReady,
    ObserveRecovery,
    PatchStatus,
    Plan,
    ReleaseQuota,
)


@dataclass
class LocalExecutor(Executor):
    """Applies plans to `cluster` for `job`, keeping the job's status and the run's record."""

    job: TrainingJob
    cluster: LocalCluster
    workdir: Workdir
    run_id: str
    heartbeat_seconds: float
    on_event: Callable[[JobEvent], None] = lambda _: None
    events: list[JobEvent] = field(default_factory=list)
    """What happened, in order; each with its time."""
    recoveries: list[float] = field(default_factory=list)
    recovery_parts: list[dict[str, float]] = field(default_factory=list)
    resumes: list[Recovery] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    """Set on every pod's agent besides its launch env (the run's fault directory)."""
    _ports: dict[int, int] = field(default_factory=dict)

    def apply(self, plan: Plan, now: datetime) -> None:
        for action in plan.actions:
            match action:
                case PatchStatus(status=status):
                    self.job = self.job.model_copy(update={"status": status})
                case DeletePods(names=names, force=force):
                    for name in names:
                        self.cluster.delete(name, force)
                case AssignEpoch(epoch=epoch, nodes=nodes, ranks=ranks):
                    self._assign(epoch, nodes, dict(ranks))
                case CreateNodePod(epoch=epoch, rank=rank, nodes=nodes, avoid_nodes=avoid):
                    name = node_pod_name(self.job.metadata.name or "job", epoch, rank)
                    pod = LocalPod(name, epoch, rank, "node", nodes, now, avoid=avoid)
                    self._create(pod, nodes)
                case CreateStandbyPod(epoch=epoch, index=index, avoid_nodes=avoid):
                    name = standby_pod_name(self.job.metadata.name or "job", epoch, index)
                    self._create(LocalPod(name, epoch, index, "standby", 0, now, avoid=avoid), 1)
                case ObserveRecovery(
                    seconds=seconds, parts=parts, resumed=resumed, redone_steps=redone,
                    epoch=epoch, until=until,
                ):  # fmt: skip
                    self.recoveries.append(round(seconds, 3))
                    self.recovery_parts.append(dict(parts))
                    self.resumes.append(
                        Recovery(
                            epoch=epoch,
                            from_step=resumed.step if resumed else None,
                            source=resumed.source if resumed else None,
                            steps_redone=redone,
                            resume_reported=resumed is not None,
                            until=until,
                        )
                    )
                case EmitEvent(event=event):
                    self.record(event.at(now))
                case EnsureChildren() | EnsurePodGroup() | DeleteJob():
                    pass  # children, PodGroups, TTL deletion: no meaning on one machine
                case EnsureWorkload() | ReleaseQuota() | MarkPodsReady() | FinishWorkload():
                    pass  # no Kueue on one machine: the planner refuses a queued job there
                case _:
                    assert_never(action)

    def record(self, event: JobEvent) -> None:
        """Keep `event`, which has its time, and tell the run's watcher."""
        self.events.append(event)
        self.on_event(event)

    def _port(self, epoch: int) -> int:
        """A fresh rendezvous port per epoch."""
        return self._ports.setdefault(epoch, free_port())

    def _assign(self, epoch: int, nodes: int, ranks: dict[str, int]) -> None:
        """Publish the epoch's assignment to the agents, and relabel the pods it carries over."""
        assignment = EpochAssignment(
            epoch=epoch, nodes=nodes, master_addr=LOOPBACK, master_port=self._port(epoch),
            ranks=ranks,
        )  # fmt: skip
        body = assignment.model_dump_json(by_alias=True)
        path = self.workdir.assignment
        if path.exists() and path.read_text() == body:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(body)
        tmp.replace(path)
        for name, rank in ranks.items():
            if (pod := self.cluster.pods.get(name)) is not None:
                pod.assign(epoch, rank, nodes)

    def _create(self, pod: LocalPod, nodes: int) -> None:
        if pod.name in self.cluster.pods:
            return
        if pod.role == "standby" and not runs_agent(self.job):
            # Only an agent stands by; any other command would start training with a rank
            # nobody gave it. The pod holds its node, as a cold standby's `sleep` does.
            self.cluster.create(pod)
            return
        rank = pod.rank if pod.role == "node" else 0  # a standby's rank comes with an epoch
        launch = node_launch(
            self.job, pod.name, pod.epoch, rank, nodes, self._port(pod.epoch), self.workdir,
            self.run_id, self.heartbeat_seconds,
        )  # fmt: skip
        launch.env.update(self.extra_env)
        if pod.role == "standby":
            launch.env[env.PHALANX_STANDBY] = "1"
        pod.launch = launch
        self.cluster.create(pod)
