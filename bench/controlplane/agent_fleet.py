"""A fleet of simulated agents for the pods kwok runs: they speak the agent's own protocol, so an
in-place restart can be measured at thousands of pods on one machine.

What a pod's agent does on a cluster (`phalanx.agent.main`), and what each simulated agent does
the same way: it follows its job's assignment Lease (parsed by the agent's own
`lease_channel.parse`), and when an epoch names its pod it acknowledges by reporting `running`
in the epoch's first phase, then `training` once its workers would train; a pod the epoch does
not name reports `standby`. Reports are the agent's `wire.Report`, written as the agent's
`LeaseReports` writes them (a merge patch of its own annotation, on its report shard). A pod
starts its own epoch (from its labels, as the agent from its env) when kwok runs it.

What differs, and why: one process plays every agent. It follows each job's assignment Lease
with one watch (by name, as an agent does) instead of one per pod, and writes from a pool of threads that keep their connection
to the API server, where each agent opens one per request (2 000 TLS handshakes a restart would
cost this 2-core machine's client side seconds that real pods spend on their own CPUs; the API
server's side of them is spared too, which the report says). Between `starting` and `training`
a real agent also reports `rendezvous`, `loading` and `first-step`; the fleet reports the first
and the last, which is what the operator needs to carry a pod over and to see it train.

A real pod reports `training` once its workers reported a step, and the epoch's rank 0 then
renews the job's heartbeat Lease with its step every heartbeat period. The fleet's rank 0 writes
that heartbeat once, with the epoch's first step, when it reports `training`: without it the
operator sees an epoch that says it trains and never completes a step, and restarts it once the
start-up timeout runs out. The step then stands still, which the operator would take for a hang
while the heartbeat is renewed: the jobs the fleet plays set `hangTimeoutSeconds` past any run
(`FAILURE_POLICY`) rather than have the fleet renew every job's heartbeat every 2 s, 500 writes
a second at 1 000 jobs, more than this machine's API server takes beside the rest.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kubernetes import client as k8s

from bench.common.tally import follow
from phalanx.agent.kubeapi import KubeAPI
from phalanx.agent.lease_channel import LeaseReports, parse
from phalanx.agent.sinks import LeaseSink
from phalanx.agent.wire import Assignment, Report
from phalanx.models import labels
from phalanx.models.heartbeat import Heartbeat
from phalanx.models.names import assignment_lease_name, lease_name
from phalanx.models.vocabulary import AgentPhase

THREADS = 64
FAILURE_POLICY: dict[str, int] = {"hangTimeoutSeconds": 3600}
"""What the jobs the fleet plays set in spec.failurePolicy: their step does not move (see the
module's docstring)."""
TRAINING_AFTER_SECONDS = 1.0
"""How long after acknowledging an epoch a simulated agent says its workers train."""


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class KeptAliveAPI(KubeAPI):
    """The agent's client with one kept-alive connection per thread (see the module's why)."""

    _local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        kept: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if kept is None or kept.sock is None:
            kept = super()._connection(timeout)
            self._local.connection = kept
        return kept

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:  # fmt: skip
        connection, response = self._send(method, path, body, content_type, 10.0)
        try:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
        except Exception:
            connection.close()
            raise


@dataclass
class Acknowledged:
    """When an epoch's assignment reached the fleet and when its last pod's report was answered."""

    seen: float
    pods: int
    written: dict[str, float] = field(default_factory=dict)

    @property
    def fan_out(self) -> float | None:
        """Assignment seen -> every named pod's acknowledgement written (None: not yet)."""
        return max(self.written.values()) - self.seen if len(self.written) >= self.pods else None


@dataclass
class AgentFleet:
    """The agents of every node pod kwok runs in `namespace`, until `stop`."""

    api: k8s.ApiClient
    agents_api: KubeAPI
    namespace: str
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(THREADS))
    epochs: dict[str, int] = field(default_factory=dict)
    """Pod name -> the epoch its agent last started."""
    running: dict[str, str] = field(default_factory=dict)
    """Running pod name -> its job."""
    node_ranks: dict[str, int] = field(default_factory=dict)
    """Pod name -> the node rank its labels gave it (its rank until an assignment says)."""
    assignments: dict[str, Assignment] = field(default_factory=dict)
    """Job -> its newest assignment."""
    acknowledged: dict[tuple[str, int], Acknowledged] = field(default_factory=dict)
    """(job, epoch) -> how its assignment's acknowledgements went."""
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)
    _pending: int = 0
    _due: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _timer: threading.Condition = field(default_factory=threading.Condition)

    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When the fleet began: a pod running since before then has been training a while."""

    def start(self, jobs: list[str] | None = None) -> AgentFleet:
        """Play the agents of every node pod in the namespace. With `jobs`, each job's
        assignment Lease is followed by name, as every agent follows it; without, one watch of
        all the jobs' Leases serves (a thousand jobs would need a thousand watches), and brings
        the reports too, which the fleet skips."""
        core, leases = k8s.CoreV1Api(self.api), k8s.CoordinationV1Api(self.api)
        selector = f"{labels.ROLE}={labels.ROLE_NODE}"
        assignments = (
            [partial(leases.list_namespaced_lease, self.namespace, label_selector=labels.JOB)]
            if jobs is None
            else [partial(leases.list_namespaced_lease, self.namespace,
                          field_selector=f"metadata.name={assignment_lease_name(job)}")
                  for job in jobs]
        )  # fmt: skip
        watches: list[tuple[Callable[..., Any], Callable[[str, dict[str, Any]], None]]] = [
            (lambda **kw: core.list_namespaced_pod(self.namespace, label_selector=selector, **kw),
             self._on_pod),
            *((call, self._on_lease) for call in assignments),
        ]  # fmt: skip
        for call, handler in watches:
            threading.Thread(target=follow, args=(call, handler, self.stopped), daemon=True).start()
        threading.Thread(target=self._run_due, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def fail(self, pod: str, exit_code: int = 137) -> None:
        """The pod's worker dies: its agent reports the failure (the operator restarts in
        place)."""
        with self.lock:
            job, epoch = self.running[pod], self.epochs[pod]
        now = datetime.now(UTC)
        report = Report(pod, "failed", now, epoch, exit_code=exit_code,
                        message="worker killed by SIGKILL (simulated)", failed_at=now)  # fmt: skip
        self._write(job, report)

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        name, job = meta["name"], (meta.get("labels") or {}).get(labels.JOB, "")
        running = kind != "DELETED" and (pod.get("status") or {}).get("phase") == "Running"
        with self.lock:
            if not running or meta.get("deletionTimestamp"):
                self.running.pop(name, None)
                return
            if name in self.running:
                return
            self.running[name] = job
            epoch = int((meta.get("labels") or {}).get(labels.EPOCH, "0"))
            self.node_ranks[name] = int((meta.get("labels") or {}).get(labels.NODE_RANK, "-1"))
            assignment = self.assignments.get(job)
        if assignment is not None and assignment.epoch > epoch and name in assignment.ranks:
            epoch = assignment.epoch  # started after its epoch was replaced: joins the newest
        started = (pod.get("status") or {}).get("startTime")
        earlier = started is not None and _time(started) < self.started_at
        self._begin(job, name, epoch, None, training=earlier)

    def _on_lease(self, kind: str, lease: dict[str, Any]) -> None:
        assignment = parse(lease) if kind != "DELETED" else None
        if assignment is None:
            return
        job = (lease["metadata"].get("labels") or {}).get(labels.JOB, "")
        now = time.monotonic()
        with self.lock:
            last = self.assignments.get(job)
            if last is not None and last.epoch >= assignment.epoch:
                return
            self.assignments[job] = assignment
            key = (job, assignment.epoch)
            self.acknowledged.setdefault(key, Acknowledged(now, len(assignment.ranks)))
            pods = [pod for pod, owner in self.running.items() if owner == job]
        for pod in pods:
            if pod in assignment.ranks:
                self._begin(job, pod, assignment.epoch, key)
            else:
                self._write(job, Report(pod, "standby", datetime.now(UTC), assignment.epoch))

    def _begin(self, job: str, pod: str, epoch: int, key: tuple[str, int] | None,
               training: bool = False) -> None:  # fmt: skip
        """The pod's agent starts `epoch`: it acknowledges, then trains. A pod that ran before
        the fleet began (`training`) says at once what its agent would say by now: training."""
        with self.lock:
            if self.epochs.get(pod, -1) >= epoch:
                return
            self.epochs[pod] = epoch
        if training:
            self._submit(lambda: self._report(job, pod, epoch, "training", datetime.now(UTC)))
            return

        def acknowledge() -> None:
            since = datetime.now(UTC)
            self._report(job, pod, epoch, "starting", since)
            if key is not None:
                with self.lock:
                    self.acknowledged[key].written[pod] = time.monotonic()
            self._later(TRAINING_AFTER_SECONDS, lambda: train(since))

        def train(since: datetime) -> None:
            with self.lock:
                current = self.epochs.get(pod) == epoch and pod in self.running
            if current:
                self._report(job, pod, epoch, "training", since)

        self._submit(acknowledge)

    def _report(self, job: str, pod: str, epoch: int, phase: AgentPhase, since: datetime) -> None:
        report = Report(pod, "running", since, epoch, phase=phase, renewed=datetime.now(UTC),
                        renew_seconds=2.0)  # fmt: skip
        self._send(job, report)
        if phase == "training" and self._rank(job, pod, epoch) == 0:
            self._beat(job, pod, epoch)

    def _rank(self, job: str, pod: str, epoch: int) -> int | None:
        """The pod's node rank in `epoch`: its assignment's, else its labels' (a pod that ran
        before the fleet saw the epoch's assignment)."""
        with self.lock:
            assignment = self.assignments.get(job)
            if assignment is not None and assignment.epoch == epoch:
                return assignment.ranks.get(pod)
            return self.node_ranks.get(pod)

    def _beat(self, job: str, pod: str, epoch: int) -> None:
        """Rank 0's heartbeat with the epoch's first step, as its agent passes on what rank 0's
        worker wrote (see the module's docstring)."""
        beat = Heartbeat(epoch=epoch, step=1).model_dump_json(by_alias=True, exclude_none=True)
        try:
            LeaseSink(self.namespace, lease_name(job), pod, api=self.agents_api).publish(beat)
        except Exception as error:  # recorded: the run reports every write that failed
            self.errors.append(f"{pod}: heartbeat: {error}")

    def _write(self, job: str, report: Report) -> None:
        self._submit(lambda: self._send(job, report))

    def _send(self, job: str, report: Report) -> None:
        try:
            LeaseReports(self.namespace, lease_name(job), api=self.agents_api).publish(report)
        except Exception as error:  # recorded: the run reports every write that failed
            self.errors.append(f"{report.pod}: {error}")

    def idle(self) -> bool:
        """No report is waiting to be written or due later."""
        with self.lock:
            return self._pending == 0 and not self._due

    def _submit(self, work: Callable[[], None]) -> None:
        def counted() -> None:
            try:
                work()
            finally:
                with self.lock:
                    self._pending -= 1

        with self.lock:
            if self.stopped.is_set():
                return
            self._pending += 1
        self.pool.submit(counted)

    def _later(self, seconds: float, work: Callable[[], None]) -> None:
        """`work` submitted after `seconds`, without holding a thread meanwhile."""
        with self._timer:
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._order), work))
            self._timer.notify()

    def _run_due(self) -> None:
        while not self.stopped.is_set():
            with self._timer:
                wait = self._due[0][0] - time.monotonic() if self._due else 1.0
                if wait > 0:
                    self._timer.wait(min(wait, 1.0))
                    continue
                _, _, work = heapq.heappop(self._due)
            self._submit(work)
