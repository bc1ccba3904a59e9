"""A chaos soak on kind: one job trains for N minutes while faults from the matrix strike at
random, one at a time, each healed once the job trains again; then the invariants are checked
and the report written (`make soak MINUTES=N`, tests/e2e/test_soak.py).

The job: the reference trainer on 2 node pods with a hot spare (the kind cluster's 3 workers
hold one pod each), the failure policy at its defaults (so the adaptive hang timeout is the one
on duty), a checkpoint every 10 steps.

Invariants, each reported held or broken with what broke it:
- every fault is found as its own kind (the failure reasons the kind suite's cases name) and
  costs exactly one restart; no restart and no failure happens without a fault (the defaults
  never fire on a healthy job);
- never two pods holding one rank in an epoch: every assignment names each rank once, and no
  agent runs an epoch whose assignment does not name its pod (a fenced pod never rejoins);
- the job's status agrees with its pods once it trains again: each ranked pod exists and runs,
  and its spares are its running standby pods;
- every sample used exactly once per data epoch over the kept steps, from the trainer's sample
  audit; the kept losses within 1e-3 of an uninterrupted run of the same job on the local
  backend (the world size never changes: the spare takes the lost rank);
- nothing left behind once the job is deleted: pods, Services, ServiceAccounts, Roles,
  RoleBindings, Leases.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from bench.common import stats
from phalanx.local import LocalRun, RunOptions
from phalanx.models import TrainingJob
from phalanx.models.assignment import EpochAssignment
from phalanx.models.labels import AGENT_REPORT_PREFIX, ASSIGNMENT
from phalanx.models.names import assignment_lease_name, lease_name
from tests.e2e import faults
from tests.e2e.cluster import KindCluster, first_step_after, for_kind, wait_for
from tests.e2e.jobs import training_job
from tests.support.gang import check_exactly_once, trajectory

JOB = "soak"
NODES = 2
GLOBAL_BATCH = 12  # training_job's
DATASET = 240  # the trainer's default
LOSS_TOLERANCE = 1e-3


@dataclass
class Scene:
    """Where a fault strikes: the job's pods by rank, in its current epoch."""

    kind: KindCluster
    namespace: str
    ranks: dict[int, k8s.V1Pod]
    rng: random.Random


Heal = Callable[[], None]
Inject = Callable[[Scene], Heal]


def _victim(scene: Scene) -> k8s.V1Pod:
    return scene.ranks[scene.rng.randrange(NODES)]


def _kill(scene: Scene) -> Heal:
    faults.kill_worker(scene.kind, _victim(scene))
    return lambda: None


def _delete(scene: Scene) -> Heal:
    faults.delete_pod(scene.kind, _victim(scene))
    return lambda: None


def _hang(scene: Scene) -> Heal:
    faults.hang_worker(scene.kind, _victim(scene))
    return lambda: None


def _stall(scene: Scene) -> Heal:
    faults.stall_worker(scene.kind, _victim(scene))
    return faults.release_stalls


def _freeze(scene: Scene) -> Heal:
    node = str(_victim(scene).spec.node_name)
    scene.kind.freeze_node(node)
    return lambda: scene.kind.thaw_node(node)


def _partition(scene: Scene) -> Heal:
    a, b = scene.ranks[0], scene.ranks[1]
    scene.kind.partition(a, b)
    return lambda: scene.kind.partition(a, b, heal=True)


def _lose_node(scene: Scene) -> Heal:
    node = str(_victim(scene).spec.node_name)
    scene.kind.stop_node(node)
    return lambda: scene.kind.start_node(node)


FAULTS: dict[str, tuple[Inject, set[str]]] = {
    "worker-killed": (_kill, {"Killed"}),
    "pod-deleted": (_delete, {"PodDeleted"}),
    "rank-hung": (_hang, {"Hang"}),
    "rank-stalled": (_stall, {"Hang"}),
    "node-frozen": (_freeze, {"PeerSilent"}),
    "partition": (_partition, {"PeerSilent"}),
    "node-lost": (_lose_node, {"PeerSilent"}),
}
"""Each fault and the failure reasons that find it (the kind suite's cases)."""


@dataclass
class Struck:
    """One fault and what followed it."""

    fault: str
    epoch: int
    at: float
    training_again: float | None = None
    reasons: list[str] = field(default_factory=list)
    restarts: int = 0


@dataclass
class Soak:
    """What the soak saw, and the invariants it found broken (each a sentence)."""

    minutes: float
    struck: list[Struck] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    kept_steps: int = 0
    goodput: float | None = None
    worst_loss_difference: float | None = None
    unreadable_audit_lines: int = 0

    def figures(self) -> dict[str, Any]:
        recoveries = [s.training_again - s.at for s in self.struck if s.training_again]
        tail = stats.tail(recoveries) if recoveries else None
        by_kind: dict[str, int] = {}
        for s in self.struck:
            by_kind[s.fault] = by_kind.get(s.fault, 0) + 1
        return {
            "minutes": self.minutes, "faults": by_kind, "recoveries": recoveries,
            "p50": stats.median(recoveries) if recoveries else None,
            "tail": None if tail is None else {"label": tail.label, "value": tail.value},
            "goodput": self.goodput, "kept_steps": self.kept_steps,
            "worst_loss_difference": self.worst_loss_difference,
            "unreadable_audit_lines": self.unreadable_audit_lines,
            "broken": self.broken,
            "struck": [s.__dict__ for s in self.struck],
        }  # fmt: skip


class RankWatch(threading.Thread):
    """Every second: each assignment names each rank once, and no agent runs an epoch whose
    assignment (as seen) does not name its pod."""

    def __init__(self, kind: KindCluster, namespace: str, broken: list[str]) -> None:
        super().__init__(name="rank-watch", daemon=True)
        self.leases = k8s.CoordinationV1Api(kind.core.api_client)
        self.namespace, self.broken = namespace, broken
        self.assignments: dict[int, dict[str, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.look()
            except ApiException:
                continue  # the API server restarting, a node lost: look again

    def _annotations(self, lease: str) -> dict[str, str]:
        found = self.leases.read_namespaced_lease(lease, self.namespace)
        return dict(found.metadata.annotations or {})

    def look(self) -> None:
        text = self._annotations(assignment_lease_name(JOB)).get(ASSIGNMENT)
        if text:
            assignment = EpochAssignment.model_validate_json(text)
            ranks = list(assignment.ranks.values())
            if sorted(ranks) != sorted(set(ranks)):
                self._break(f"epoch {assignment.epoch}'s assignment names a rank twice: "
                            f"{assignment.ranks}")  # fmt: skip
            self.assignments[assignment.epoch] = dict(assignment.ranks)
        for key, value in self._annotations(lease_name(JOB)).items():
            if not key.startswith(AGENT_REPORT_PREFIX):
                continue
            report = json.loads(value)
            named = self.assignments.get(int(report.get("epoch", 0)))
            if (
                report.get("state") == "running"
                and named is not None
                and report["pod"] not in named
            ):
                self._break(f"pod {report['pod']} runs epoch {report['epoch']}, whose assignment "
                            f"does not name it: {named}")  # fmt: skip

    def _break(self, sentence: str) -> None:
        if sentence not in self.broken:
            self.broken.append(sentence)


def soak_job() -> dict[str, Any]:
    job = training_job(JOB, steps=1_000_000, nodes=(NODES, NODES))
    job["spec"]["failurePolicy"].pop("hangTimeoutSeconds")  # the defaults are on duty
    # but for the budget: a 30-minute soak strikes about 60 faults, each an infrastructure
    # restart, and the default (20) would fail the job by design before the soak ends
    job["spec"]["failurePolicy"]["maxInfraRestarts"] = 10_000
    job["spec"]["spares"] = 1
    return job


def run(kind: KindCluster, namespace: str, minutes: float, seed: int, workdir: Path) -> Soak:
    """The soak (module docstring); `workdir` takes the reference run."""
    soak, rng = Soak(minutes), random.Random(seed)
    kind.create_job(namespace, for_kind(soak_job()))
    log = kind.shared_dir(namespace) / JOB / "log" / "losses.jsonl"
    watch = RankWatch(kind, namespace, soak.broken)
    epoch = _steady(kind, namespace, soak, epoch=None)["epoch"]
    watch.start()
    deadline = time.monotonic() + minutes * 60
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(5, 20))  # training between faults
            status = kind.status(namespace, JOB)
            if status["epoch"] != epoch:  # no fault struck since it settled
                soak.broken.append(f"epoch {status['epoch']} began without a fault: "
                                   f"{status.get('failures', [])[-1:]}")  # fmt: skip
                epoch = _steady(kind, namespace, soak, epoch=epoch)["epoch"]
                continue
            name = rng.choice(sorted(FAULTS))
            inject, expected = FAULTS[name]
            struck = Struck(name, status["epoch"], time.time())
            restarts_before = _restarts(kind, namespace)
            heal = inject(Scene(kind, namespace, _pods_by_rank(kind, namespace, status), rng))
            soak.struck.append(struck)
            try:
                found = wait_for(functools.partial(first_step_after, log, struck.epoch), 300,
                                 f"training again after {name}")  # fmt: skip
                struck.training_again = found[1]
            finally:
                heal()
            after = _steady(kind, namespace, soak, epoch=struck.epoch)
            epoch = after["epoch"]
            struck.reasons = [f["reason"] for f in after.get("failures", [])
                              if f["epoch"] == struck.epoch]  # fmt: skip
            struck.restarts = _restarts(kind, namespace) - restarts_before
            if not struck.reasons or not set(struck.reasons) <= expected:
                soak.broken.append(f"{name} in epoch {struck.epoch} found as {struck.reasons}, "
                                   f"not {sorted(expected)}")  # fmt: skip
            if struck.restarts != 1:
                soak.broken.append(f"{name} in epoch {struck.epoch} cost {struck.restarts} "
                                   "restarts, not 1")  # fmt: skip
    finally:
        watch.stop.set()
        faults.release_stalls()
        kind.restore_nodes()
    _stop_and_check_the_trajectory(kind, namespace, soak, workdir)
    _delete_and_check_nothing_is_left(kind, namespace, soak)
    return soak


def _steady(kind: KindCluster, namespace: str, soak: Soak, epoch: int | None) -> dict[str, Any]:
    """Wait until the job trains past `epoch` with its spare back, then check its status against
    its pods; the status."""

    def steady(s: dict[str, Any]) -> bool:
        progress = s.get("progress") or {}
        return (s.get("phase") == "Running" and s.get("spares") == 1
                and (epoch is None or s.get("epoch", 0) > epoch)
                and progress.get("epoch") == s.get("epoch") and progress.get("step", 0) > 10)  # fmt: skip

    status = kind.wait_status(namespace, JOB, steady, "training, its spare back", timeout=600)
    ranks = kind.epoch_ranks(namespace, JOB, status["epoch"])
    pods = {p.metadata.name: p for p in kind.core.list_namespaced_pod(
        namespace, label_selector=f"phalanx.dev/job={JOB}").items}  # fmt: skip
    if sorted(ranks.values()) != list(range(NODES)):
        soak.broken.append(f"epoch {status['epoch']}: ranks {ranks} are not 0..{NODES - 1}")
    for pod, rank in ranks.items():
        found = pods.get(pod)
        if found is None or found.status.phase != "Running" or found.metadata.deletion_timestamp:
            soak.broken.append(f"epoch {status['epoch']}: rank {rank}'s pod {pod} does not run")
    standbys = [p for name, p in pods.items() if name not in ranks
                and p.metadata.labels.get("phalanx.dev/role") == "standby"
                and p.status.phase == "Running" and not p.metadata.deletion_timestamp]  # fmt: skip
    if len(standbys) < status["spares"]:
        soak.broken.append(f"epoch {status['epoch']}: status.spares {status['spares']} but "
                           f"{len(standbys)} standby pods run")  # fmt: skip
    return status


def _pods_by_rank(kind: KindCluster, namespace: str, status: dict[str, Any]) -> dict[int, Any]:
    ranks = kind.epoch_ranks(namespace, JOB, status["epoch"])
    return {rank: kind.core.read_namespaced_pod(pod, namespace) for pod, rank in ranks.items()}


def _restarts(kind: KindCluster, namespace: str) -> int:
    return sum(1 for e in kind.events(namespace, JOB) if e.reason == "Restart")


def _stop_and_check_the_trajectory(kind: KindCluster, namespace: str, soak: Soak,
                                   workdir: Path) -> None:  # fmt: skip
    """Suspend the job (its ranks checkpoint and stop), then check the kept steps' samples and
    losses against an uninterrupted run of the same job on the local backend."""
    kind.custom.patch_namespaced_custom_object(
        "phalanx.dev", "v1alpha1", namespace, "trainingjobs", JOB, {"spec": {"suspend": True}})  # fmt: skip
    status = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Suspended",
                              "Suspended", timeout=300)  # fmt: skip
    soak.goodput = status.get("goodput")
    losses, samples, soak.unreadable_audit_lines = kept(kind.shared_dir(namespace) / JOB / "log")
    soak.kept_steps = max(losses, default=0)
    try:
        check_exactly_once(samples, DATASET, GLOBAL_BATCH, soak.kept_steps)
    except AssertionError as error:
        soak.broken.append(f"samples: {error}")
    reference = _reference_losses(soak.kept_steps, workdir)
    differences = [abs(reference[s] - losses[s]) for s in reference if s in losses]
    soak.worst_loss_difference = max(differences, default=None)
    if len(differences) != soak.kept_steps or (soak.worst_loss_difference or 0) > LOSS_TOLERANCE:
        soak.broken.append(f"losses: {len(differences)} of {soak.kept_steps} steps compared, the "
                           f"worst {soak.worst_loss_difference} from the uninterrupted run")  # fmt: skip


def kept(log: Path) -> tuple[dict[int, float], dict[int, tuple[int, list[int]]], int]:
    """The kept steps' losses and samples (`tests.support.gang.trajectory`), and how many audit
    lines could not be read (a worker killed mid-line)."""
    torn: list[str] = []

    def lines(path: Path) -> list[dict[str, Any]]:
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                torn.append(line)
        return out

    samples = [r for path in sorted(log.glob("samples-*.jsonl")) for r in lines(path)]
    losses, by_step = trajectory(lines(log / "losses.jsonl"), samples)
    return losses, {s: v for s, v in by_step.items() if s in losses}, len(torn)


def _reference_losses(steps: int, workdir: Path) -> dict[int, float]:
    """The same job for `steps` steps without a fault, on the local backend, without the kind
    adaptations or the emulated compute (neither changes a loss)."""
    manifest = soak_job()
    spec = manifest["spec"]
    spec["trainer"]["steps"] = steps
    spec["spares"] = 0
    container = spec["template"]["spec"]["containers"][0]
    container.pop("resources", None)
    container["args"] = ["python", "-m", "phalanx.trainer.train"]
    spec["checkpoint"] = {"dir": str(workdir / "checkpoints"), "intervalSteps": 1000}
    LocalRun(TrainingJob.from_manifest(manifest), RunOptions(workdir=workdir, fresh=True)).run()
    records = [
        json.loads(line) for line in (workdir / "log" / "losses.jsonl").read_text().splitlines()
    ]
    return {int(r["step"]): float(r["loss"]) for r in records if "loss" in r}


def _leftovers(kind: KindCluster, namespace: str) -> dict[str, list[str]]:
    """The namespace's objects of the kinds a job creates (its default ServiceAccount aside)."""
    rbac = k8s.RbacAuthorizationV1Api(kind.core.api_client)
    leases = k8s.CoordinationV1Api(kind.core.api_client)
    found: dict[str, list[Any]] = {
        "pods": kind.core.list_namespaced_pod(namespace).items,
        "services": kind.core.list_namespaced_service(namespace).items,
        "serviceaccounts": kind.core.list_namespaced_service_account(namespace).items,
        "roles": rbac.list_namespaced_role(namespace).items,
        "rolebindings": rbac.list_namespaced_role_binding(namespace).items,
        "leases": leases.list_namespaced_lease(namespace).items,
    }
    names = {what: [o.metadata.name for o in objects if o.metadata.name != "default"]
             for what, objects in found.items()}  # fmt: skip
    return {what: listed for what, listed in names.items() if listed}


def _delete_and_check_nothing_is_left(kind: KindCluster, namespace: str, soak: Soak) -> None:
    kind.custom.delete_namespaced_custom_object("phalanx.dev", "v1alpha1", namespace,
                                                "trainingjobs", JOB)  # fmt: skip

    try:
        wait_for(lambda: not _leftovers(kind, namespace), 180, "the job's objects gone",
                 interval=2)  # fmt: skip
    except AssertionError:
        soak.broken.append(f"left behind after delete: {_leftovers(kind, namespace)}")
