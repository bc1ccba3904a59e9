"""The Kueue Workload of a queued job (see `planner.queueing`): one pod set, `node`, shaped like
the job's node pod, so that Kueue counts exactly the resources its pods request (the template's,
plus what the operator adds: snapshot memory, the injected agent's init container)."""

from __future__ import annotations

from typing import Any

from phalanx.models import labels
from phalanx.models.job import TrainingJob
from phalanx.models.names import workload_name
from phalanx.operator.builder.children import child_metadata
from phalanx.operator.builder.env import BuildSettings
from phalanx.operator.builder.pods import node_pod

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
WORKLOAD_PLURAL = "workloads"
POD_SET = "node"
"""The one pod set: node pods and hot spares alike (a spare runs the same template)."""

Manifest = dict[str, Any]


def workload(
    job: TrainingJob, count: int, min_count: int, active: bool, settings: BuildSettings,
    priority: int | None = None, epoch: int = 0, snapshot_bytes: int = 0,
) -> Manifest:  # fmt: skip
    """The Workload asked for in the job's `epoch` (0: its first; later: to grow): `count`
    pods, Kueue may admit as few as `min_count` (partial admission); queued in the job's
    LocalQueue; `priority`, the value of the job's priorityClassName, where it names one; each
    pod's memory with `snapshot_bytes` for its snapshots (the planner's figure)."""
    pod = node_pod(job, 1, 0, count, settings, snapshot_bytes=snapshot_bytes)
    template = {"metadata": {"labels": pod["metadata"].get("labels", {})}, "spec": pod["spec"]}
    pod_set: Manifest = {"name": POD_SET, "count": count, "template": template}
    if min_count < count:
        pod_set["minCount"] = min_count
    spec: Manifest = {
        "podSets": [pod_set],
        "queueName": (job.metadata.labels or {}).get(labels.KUEUE_QUEUE, ""),
        "active": active,
    }
    if priority is not None and job.spec.priority_class_name:
        spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                    "name": job.spec.priority_class_name}  # fmt: skip
        spec["priority"] = priority
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": child_metadata(
            job, workload_name(job.metadata.name or "", epoch), {labels.EPOCH: str(epoch)}
        ),
        "spec": spec,
    }
