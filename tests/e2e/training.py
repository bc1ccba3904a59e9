"""A reference-trainer job on kind, trained past a checkpoint before a fault strikes, and what
its step log (losses.jsonl on the shared volume) says: shared by the fault tests."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from phalanx.local import LocalRun, RunOptions
from phalanx.models import TrainingJob
from phalanx.models.labels import KUEUE_QUEUE
from tests.e2e import faults
from tests.e2e.cluster import KindCluster, first_step_after, for_kind, wait_for
from tests.e2e.jobs import training_job

JOB = "faulty"


def step_log(kind: KindCluster, namespace: str) -> Path:
    return kind.shared_dir(namespace) / JOB / "log" / "losses.jsonl"


def resumes(kind: KindCluster, namespace: str) -> list[dict[str, Any]]:
    log = step_log(kind, namespace)
    lines = log.read_text().splitlines() if log.exists() else []
    return [r for r in map(json.loads, lines) if r.get("event") == "resume"]


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def trained_and_resumed(lines: list[dict[str, Any]], epoch: int) -> tuple[int, int]:
    """The last step `epoch` trained, and the step the next epoch resumed from (equal: no step
    redone)."""
    last = max(i for i, r in enumerate(lines) if r.get("epoch") == epoch and "loss" in r)
    resumed = next(r for r in lines[last:] if r.get("event") == "resume")
    return int(lines[last]["step"]), int(resumed["from"])


def training(
    log: Path, *, nodes: int | None = None, spares: int | None = None
) -> Callable[[dict[str, Any]], bool]:
    """The job runs (at `nodes`, with `spares` standing by, where given), past a checkpoint, and
    the current epoch's workers are stepping."""

    def check(status: dict[str, Any]) -> bool:
        epoch = status.get("epoch", 0)
        return (
            status.get("phase") == "Running"
            and (nodes is None or status.get("nodes") == nodes)
            and (spares is None or status.get("spares") == spares)
            and (status.get("lastCheckpoint") or {}).get("step", 0) >= 10
            and (first_step_after(log, epoch - 1) or (0,))[0] == epoch
        )

    return check


def training_with_a_spare(
    kind: KindCluster, namespace: str, *, default_policy: bool = False
) -> tuple[Path, int, k8s.V1Pod]:
    """A 2-node job of 250 steps with one hot spare, training past a checkpoint: its step log,
    its epoch and node rank 1's pod. `default_policy`: the failure policy's defaults (no
    hangTimeoutSeconds: the adaptive timeout, 30 s floor)."""
    job = for_kind(training_job(JOB, steps=250, nodes=(2, 2)))
    job["spec"]["spares"] = 1
    if default_policy:
        del job["spec"]["failurePolicy"]["hangTimeoutSeconds"]
    kind.create_job(namespace, job)
    log = step_log(kind, namespace)
    before = kind.wait_status(namespace, JOB, training(log, spares=1),
                              "training on 2 nodes with 1 hot spare", timeout=300)  # fmt: skip
    epoch = before["epoch"]
    return log, epoch, kind.running_pod(namespace, JOB, epoch, rank=1)


def reference_losses(manifest: dict[str, Any], steps: int, workdir: Path) -> dict[int, float]:
    """The loss of each step of the same job run `steps` steps without a fault on the local
    backend, at its largest size: without the kind adaptations, the emulated compute, hot
    spares or a queue (none changes a loss)."""
    job = copy.deepcopy(manifest)
    (job["metadata"].get("labels") or {}).pop(KUEUE_QUEUE, None)
    spec = job["spec"]
    spec["trainer"]["steps"] = steps
    spec["spares"] = 0
    spec.pop("priorityClassName", None)
    spec["template"]["spec"].pop("volumes", None)
    container = spec["template"]["spec"]["containers"][0]
    for key in ("resources", "volumeMounts"):
        container.pop(key, None)
    container["args"] = ["python", "-m", "phalanx.trainer.train"]
    spec["checkpoint"] = {"dir": str(workdir / "checkpoints"), "intervalSteps": 1000}
    LocalRun(TrainingJob.from_manifest(job), RunOptions(workdir=workdir, fresh=True)).run()
    lines = (workdir / "log" / "losses.jsonl").read_text().splitlines()
    return {int(r["step"]): float(r["loss"]) for r in map(json.loads, lines) if "loss" in r}


@dataclass(frozen=True)
class Replaced:
    """A pod of a 3-node job deleted while it trained, and what followed (`replace_a_pod`)."""

    victim: k8s.V1Pod
    deleted_at: float
    epoch: int
    """The epoch that trained after it."""
    first_step: float
    """When that epoch's first step came (the trainer's clock)."""
    status: dict[str, Any]
    carried: dict[str, int]
    """The pods that carried over in place, by name: their node rank."""


def replace_a_pod(kind: KindCluster, namespace: str, job: str) -> Replaced:
    """Once `job` (3 node pods) trains past a checkpoint, delete node rank 1's pod; return when
    the next epoch has stepped, checking the other two carried over in place."""
    log = kind.shared_dir(namespace) / job / "log" / "losses.jsonl"
    before = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Running"
                              and (s.get("lastCheckpoint") or {}).get("step", 0) >= 10,
                              "training past a checkpoint", timeout=300)  # fmt: skip
    victim = kind.running_pod(namespace, job, before["epoch"], rank=1)
    deleted_at = time.time()
    faults.delete_pod(kind, victim)
    epoch, first_step = wait_for(lambda: first_step_after(log, before["epoch"]), 300,
                                 "a step of the next epoch")  # fmt: skip
    assert epoch > 1
    status = kind.status(namespace, job)
    carried = dict((status.get("current") or {}).get("ranks") or {})
    assert victim.metadata.name not in carried, carried
    assert len(carried) == 2, f"the two other pods carried over in place: {carried}"
    return Replaced(victim, deleted_at, epoch, first_step, status, carried)
