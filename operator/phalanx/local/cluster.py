"""A tiny local "cluster": nodes that come and go, pods bound to them, processes that run them.

Why it mimics Kubernetes this closely: the planner reads pods and nodes, so the local backend must
show it the same facts a cluster would. A pod binds to a free Ready node (or stays Pending when
capacity is short), a node pod's agent starts when it binds, deleting a pod sends SIGTERM and
SIGKILL after the grace period, a lost node is NotReady and its pod failed. Standby pods hold a
node with an agent that waits, warm, for an epoch to take a rank in (a hot spare). An agent dies
with the process that runs the cluster (PHALANX_PARENT_PID), even when that one is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from phalanx.local import processes
from phalanx.local.throttle import Throttler
from phalanx.models import env as contract
from phalanx.models import exits
from phalanx.models.assignment import AgentReport
from phalanx.models.heartbeat import Heartbeat
from phalanx.operator.planner import NodeView, Observed, PodView
from phalanx.operator.planner.observed import PodPhase, Role

NODE_PREFIX = "local-"


@dataclass(frozen=True)
class Launch:
    """How to start a node pod's agent: its command line, environment and files."""

    argv: tuple[str, ...]
    env: dict[str, str]
    log: Path
    termination_log: Path
    agent_report: Path | None = None
    """Where its agent reports its state, when it takes new epochs in place."""


@dataclass
class LocalPod:
    """A pod of the job on the local cluster."""

    name: str
    epoch: int
    rank: int
    role: Role
    epoch_nodes: int
    created: datetime
    launch: Launch | None = None
    """None for a pod that only holds a node (a standby without an agent)."""
    node: str | None = None
    process: subprocess.Popen[bytes] | None = None
    phase: PodPhase = "Pending"
    exit_code: int | None = None
    message: str | None = None
    waiting_reason: str | None = None
    """Set when the command cannot start (a configuration error, as on a cluster)."""
    deleting_since: float | None = None
    """time.monotonic() of the delete request."""
    stop_deadline: datetime | None = None
    """A graceful delete's end: when its processes are killed (`LocalCluster.grace_seconds`)."""
    avoid: tuple[str, ...] = ()
    """Nodes it must not run on (where stragglers ran), as the operator's node affinity says."""

    @property
    def alive(self) -> bool:
        """Its process runs (or is stopped, but not yet reaped)."""
        return self.process is not None and self.process.poll() is None

    @property
    def holds_node(self) -> bool:
        """It occupies its node: running, starting, or a bound standby."""
        return self.node is not None and (self.alive or self.phase in ("Pending", "Running"))

    def agent(self) -> AgentReport | None:
        """Its agent's last report, while the pod runs (a dead agent answers nothing)."""
        if self.launch is None or self.launch.agent_report is None or self.phase != "Running":
            return None
        try:
            return AgentReport.model_validate_json(self.launch.agent_report.read_bytes())
        except (OSError, ValidationError):
            return None

    def assign(self, epoch: int, rank: int, nodes: int) -> None:
        """Carried into a new epoch: its labels change, as the operator relabels a pod."""
        self.epoch, self.rank, self.role, self.epoch_nodes = epoch, rank, "node", nodes

    def view(self) -> PodView:
        return PodView(
            name=self.name,
            epoch=self.epoch,
            rank=self.rank,
            role=self.role,
            # A standby runs a warm agent when it runs anything (a job whose command is not
            # the agent gets standbys that only hold their node: no launch)
            warm=self.role == "standby" and self.launch is not None,
            epoch_nodes=self.epoch_nodes,
            phase=self.phase,
            node_name=self.node,
            deleting=self.deleting_since is not None,
            stop_deadline=self.stop_deadline,
            created=self.created,
            exit_code=self.exit_code,
            terminated_reason="Error" if self.exit_code not in (None, 0) else None,
            waiting_reason=self.waiting_reason,
            message=self.message,
            agent=self.agent(),
        )


@dataclass
class LocalCluster:
    """Nodes, pods and processes of one local run."""

    grace_seconds: float = 5.0
    nodes: dict[str, bool] = field(default_factory=dict)
    """Node name -> Ready."""
    cordoned: dict[str, str] = field(default_factory=dict)
    """Nodes being drained for maintenance -> why: nothing new is bound there, and each leaves
    the cluster once no pod holds it."""
    pods: dict[str, LocalPod] = field(default_factory=dict)
    _next_node: int = 0
    _throttler: Throttler | None = None

    # Capacity

    @property
    def ready_nodes(self) -> list[str]:
        return [name for name, ready in self.nodes.items() if ready]

    def set_capacity(self, count: int) -> list[str]:
        """Grow or shrink to `count` Ready nodes. Shrinking removes idle nodes first, then standby
        holders, then nodes running the highest node ranks (those are lost). Returns the nodes
        lost with a pod on them."""
        ready = self.ready_nodes
        for _ in range(count - len(ready)):
            self.nodes[f"{NODE_PREFIX}{self._next_node}"] = True
            self._next_node += 1
        if count >= len(ready):
            return []
        holders = {p.node: p for p in self.pods.values() if p.node and p.holds_node}

        def removal_order(node: str) -> tuple[int, int]:
            pod = holders.get(node)
            if pod is None:
                return (0, 0)
            return (1, 0) if pod.role == "standby" else (2, -pod.rank)

        lost = []
        for node in sorted(ready, key=removal_order)[: len(ready) - count]:
            pod = holders.get(node)
            if pod is None:
                del self.nodes[node]
            elif pod.role == "standby":
                self.kill(pod, f"node {node} removed (capacity {count})")
                del self.nodes[node]
                del self.pods[pod.name]
            else:
                self.lose_node(node, f"node {node} removed (capacity {count})")
                lost.append(node)
        return lost

    def lose_node(self, node: str, reason: str) -> None:
        """The machine is gone: its processes die at once and it stays NotReady."""
        self.nodes[node] = False
        for pod in self.pods.values():
            if pod.node == node and pod.holds_node:
                self.kill(pod, reason)

    def cordon(self, node: str, reason: str) -> None:
        """Drain `node` for maintenance: no pod is bound there any more, the job sees it going
        (`NodeView.leaving`) and moves its ranks off, and the machine leaves once it is free."""
        self.cordoned[node] = reason

    def slow_node(self, node: str, slowdown: float) -> None:
        """The machine slows down: its processes, now and later, get 1/`slowdown` of the CPU."""
        if self._throttler is None:
            self._throttler = Throttler(self._roots_on)
        self._throttler.slow(node, slowdown)

    def _roots_on(self, node: str) -> list[int]:
        return [
            p.process.pid
            for p in list(self.pods.values())
            if p.node == node and p.process is not None and p.alive
        ]

    # Pods

    def create(self, pod: LocalPod) -> None:
        """Add a pod (a no-op if one of that name exists, like a 409 on a cluster)."""
        self.pods.setdefault(pod.name, pod)

    def delete(self, name: str, force: bool = False) -> None:
        """SIGTERM the pod's agent; SIGKILL its tree once the grace period ends (see `tick`), or
        at once with `force` (a lost or frozen machine cannot stop gracefully)."""
        pod = self.pods.get(name)
        if pod is None or (pod.deleting_since is not None and not force):
            return
        pod.deleting_since = pod.deleting_since or time.monotonic()
        if force and pod.alive and pod.process is not None:
            processes.signal_tree(pod.process.pid, signal.SIGKILL)
        elif pod.alive and pod.process is not None:
            pod.stop_deadline = datetime.now(UTC) + timedelta(seconds=self.grace_seconds)
            with contextlib.suppress(ProcessLookupError):
                pod.process.send_signal(signal.SIGTERM)
        else:
            del self.pods[name]

    def kill(self, pod: LocalPod, reason: str) -> None:
        """SIGKILL the pod's agent and workers together, as a crashed machine would."""
        if pod.process is not None:
            processes.signal_tree(pod.process.pid, signal.SIGKILL)
            pod.process.wait()
        pod.phase, pod.exit_code = "Failed", exits.SIGNAL_BASE + signal.SIGKILL
        pod.message = reason

    def pod_of(self, epoch: int, rank: int) -> LocalPod | None:
        """Node pod `rank` of `epoch`."""
        return next(
            (
                p
                for p in self.pods.values()
                if p.role == "node" and p.epoch == epoch and p.rank == rank
            ),
            None,
        )

    # The clock

    def tick(self) -> None:
        """Reap exits, enforce grace periods, and bind and start pending pods."""
        now = time.monotonic()
        for pod in list(self.pods.values()):
            self._reap(pod)
            if pod.deleting_since is None:
                continue
            if not pod.alive:
                del self.pods[pod.name]
            elif now - pod.deleting_since >= self.grace_seconds and pod.process is not None:
                processes.signal_tree(pod.process.pid, signal.SIGKILL)
        self._schedule()

    def _reap(self, pod: LocalPod) -> None:
        if pod.process is None or pod.phase in ("Succeeded", "Failed"):
            return
        code = pod.process.poll()
        if code is None:
            return
        if code < 0:
            code = exits.SIGNAL_BASE - code
        pod.exit_code = code
        pod.phase = "Succeeded" if code == 0 else "Failed"
        if code and pod.launch is not None:
            with contextlib.suppress(OSError):
                pod.message = pod.launch.termination_log.read_text().strip() or None

    def _schedule(self) -> None:
        held = {p.node for p in self.pods.values() if p.holds_node}
        for drained in [n for n in self.cordoned if n not in held]:  # it leaves
            self.nodes.pop(drained, None)
            del self.cordoned[drained]
        free = [n for n in self.ready_nodes if n not in held and n not in self.cordoned]
        waiting = sorted(
            (p for p in self.pods.values() if p.node is None and p.deleting_since is None),
            key=lambda p: (p.role != "node", p.epoch, p.rank),
        )
        for pod in waiting:
            node = next((n for n in free if n not in pod.avoid), None)
            if node is None:
                continue
            free.remove(node)
            pod.node = node
            if pod.launch is not None:
                self._start(pod)

    def _start(self, pod: LocalPod) -> None:
        launch = pod.launch
        assert launch is not None
        launch.log.parent.mkdir(parents=True, exist_ok=True)
        launch.termination_log.parent.mkdir(parents=True, exist_ok=True)
        with launch.log.open("ab") as out:
            try:
                pod.process = subprocess.Popen(
                    launch.argv,
                    # The agent dies with the thread that starts it: the run's main thread.
                    env={**launch.env, contract.PHALANX_PARENT_PID: str(os.getpid())},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # Ctrl-C in the terminal reaches only the CLI
                )
            except OSError as error:  # e.g. a typo in the command: no restart loop
                pod.waiting_reason = "CreateContainerError"
                pod.message = f"cannot start {launch.argv[0]}: {error.strerror or error}"
                return
        pod.phase = "Running"

    # What the planner sees

    def observed(self, heartbeat: Heartbeat | None) -> Observed:
        referenced = {p.node for p in self.pods.values() if p.node}
        for node in [n for n, ready in self.nodes.items() if not ready and n not in referenced]:
            del self.nodes[node]  # a lost node no pod refers to any more is forgotten
        return Observed(
            pods=tuple(p.view() for p in self.pods.values()),
            nodes={
                name: NodeView(name, ready, leaving=self.cordoned.get(name))
                for name, ready in self.nodes.items()
            },
            heartbeat=heartbeat,
        )

    def live_pods(self) -> list[LocalPod]:
        return [p for p in self.pods.values() if p.alive]

    def shutdown(self, pods: Iterable[LocalPod] | None = None) -> None:
        """SIGKILL every pod's processes now (a second Ctrl-C, or the end of a run)."""
        if self._throttler is not None and pods is None:
            self._throttler.close()
        for pod in list(pods if pods is not None else self.pods.values()):
            if pod.alive and pod.process is not None:
                processes.signal_tree(pod.process.pid, signal.SIGKILL)
                pod.process.wait()
