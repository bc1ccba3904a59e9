"""Node pods (gang members with ranks and the env contract) and standby pods (hot spares, or
capacity holders)."""

from __future__ import annotations

import copy
from typing import Any

from phalanx.models import env, labels
from phalanx.models.job import TrainingJob
from phalanx.models.memory import SHARED_MEMORY, quantity_bytes
from phalanx.models.names import (
    DNS_LABEL_MAX,
    env_config_map_name,
    node_pod_name,
    pod_group_name,
    service_account_name,
    service_name,
    standby_pod_name,
)
from phalanx.operator.builder.agent import annotate, inject
from phalanx.operator.builder.children import PODGROUP_LABEL, Manifest, child_metadata
from phalanx.operator.builder.env import BuildSettings, rank_env

POD_NAME_ENV: Manifest = {
    "name": env.PHALANX_POD_NAME,
    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
}
"""The agent finds its rank in an epoch's assignment under its pod's name (downward API)."""


def _template(job: TrainingJob, snapshot_bytes: int) -> tuple[Manifest, Manifest]:
    """The template's metadata and spec, as plain dicts of their own (a dump builds new ones:
    no copy of it is needed), its trainer container asking for `snapshot_bytes` more memory."""
    template = job.spec.template.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec = template["spec"]
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        _quantities_as_strings(container.get("resources") or {})
    _snapshot_memory(spec["containers"][0], snapshot_bytes)
    return template.get("metadata", {}), spec


def _snapshot_memory(container: Manifest, extra: int) -> None:
    """Add the host memory of the job's memory snapshots (`extra` bytes, the planner's figure:
    they live in the pod's /dev/shm, which counts against its memory) to the container's memory
    request, and to its limit where the template sets one: the template's figures are the
    program's, these are Phalanx's. A limit without a request is the request too, as Kubernetes
    would default it."""
    if not extra:
        return
    resources = container.setdefault("resources", {})
    limits, requests = resources.get("limits") or {}, resources.setdefault("requests", {})
    if "memory" not in requests and "memory" in limits:
        requests["memory"] = limits["memory"]
    for quantities in (requests, limits):
        if quantities is requests or "memory" in quantities:
            try:
                had = quantity_bytes(quantities["memory"]) if "memory" in quantities else 0
            except ValueError:  # a form of quantity this reading does not know: left as written
                continue
            quantities["memory"] = f"{-(-(had + extra) // 2**20)}Mi"


def _quantities_as_strings(resources: Manifest) -> None:
    """`nvidia.com/gpu: 2` is a valid quantity in YAML, but the Kubernetes client refuses a pod
    whose quantities are not strings; the API server reads "2" the same way."""
    for group in ("limits", "requests"):
        quantities = resources.get(group) or {}
        for name, value in quantities.items():
            quantities[name] = str(value)


SHARED_MEMORY_VOLUME: Manifest = {"name": "phalanx-shm", "emptyDir": {"medium": "Memory"}}
"""Host memory for the pod: the agent keeps its workers' memory snapshots here across epochs,
and torch (DataLoader workers, NCCL) needs more than the runtime's default 64 MiB /dev/shm. It
counts against the pod's memory limit."""


def _shared_memory(spec: Manifest) -> None:
    """Mount a Memory emptyDir at /dev/shm in every container that does not mount one itself."""
    containers = spec["containers"]
    if all(
        any(m.get("mountPath") == SHARED_MEMORY for m in c.get("volumeMounts", []))
        for c in containers
    ):
        return
    spec.setdefault("volumes", []).append(copy.deepcopy(SHARED_MEMORY_VOLUME))
    for container in containers:
        mounts = container.setdefault("volumeMounts", [])
        if not any(m.get("mountPath") == SHARED_MEMORY for m in mounts):
            mounts.append({"name": SHARED_MEMORY_VOLUME["name"], "mountPath": SHARED_MEMORY})


def _avoid(spec: Manifest, nodes: tuple[str, ...]) -> None:
    """Keep the pod off `nodes` (stragglers) by adding a NotIn term to its node affinity."""
    if not nodes:
        return
    expression = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": list(nodes)}
    required = (
        spec.setdefault("affinity", {})
        .setdefault("nodeAffinity", {})
        .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        term.setdefault("matchExpressions", []).append(expression)


def _metadata(
    job: TrainingJob, name: str, pod_labels: dict[str, str], template_meta: Manifest
) -> Manifest:
    meta = child_metadata(job, name, {**template_meta.get("labels", {}), **pod_labels})
    if template_meta.get("annotations"):
        meta["annotations"] = template_meta["annotations"]
    return meta


def _spread_over_nodes(job: TrainingJob) -> Manifest:
    """The job's pods (node pods and spares) prefer nodes without another of them: a node lost
    takes one rank, and a spare on a rank's node would go with it. Soft (ScheduleAnyway): a
    full cluster still places them. Why stated at all: the job's headless Service selects its
    pods, and for pods a Service selects kube-scheduler otherwise applies its default
    constraints, spreading them over hosts and over zones, the second of which a training job
    does not want (its collectives would cross zones), and which cost the scheduler more time
    than this one (docs/figures.md, "Scheduling"). A template's own constraints replace it."""
    return {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {labels.JOB: job.metadata.name or ""}},
    }


def _scheduling(job: TrainingJob, spec: Manifest) -> None:
    if not spec.get("topologySpreadConstraints"):
        spec["topologySpreadConstraints"] = [_spread_over_nodes(job)]
    if job.spec.scheduler_name:
        spec["schedulerName"] = job.spec.scheduler_name
    if job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name


def node_pod(
    job: TrainingJob,
    epoch: int,
    rank: int,
    nodes: int,
    settings: BuildSettings,
    avoid_nodes: tuple[str, ...] = (),
    pod_group: bool = False,
    master: str | None = None,
    agent: bool = True,
    snapshot_bytes: int = 0,
) -> Manifest:
    """Node pod `rank` of `epoch`: the template plus ranks, DNS, env contract and scheduling;
    `snapshot_bytes` more memory for its memory snapshots (the planner's figure)."""
    name = job.metadata.name or ""
    pod_labels = {
        labels.EPOCH: str(epoch),
        labels.NODE_RANK: str(rank),
        labels.ROLE: labels.ROLE_NODE,
        labels.NNODES: str(nodes),
    }
    if pod_group:
        pod_labels[PODGROUP_LABEL] = pod_group_name(name)
    contract = rank_env(job, epoch, rank, nodes, settings, master)
    pod_name = node_pod_name(name, epoch, rank)
    return _gang_pod(
        job, pod_name, pod_labels, contract, avoid_nodes, settings, agent, snapshot_bytes
    )


def _gang_pod(
    job: TrainingJob,
    pod_name: str,
    pod_labels: dict[str, str],
    contract: dict[str, str],
    avoid_nodes: tuple[str, ...],
    settings: BuildSettings,
    agent: bool = True,
    snapshot_bytes: int = 0,
) -> Manifest:
    """The template as a member of the gang: the agent where it is injected, the env contract
    (the pod's own part in `contract`, the job's by envFrom from its ConfigMap; the template's
    own variables win), the pod's name for its agent, a DNS name under the job's Service, and
    scheduling."""
    template_meta, spec = _template(job, snapshot_bytes)
    config = env_config_map_name(job.metadata.name or "")
    for container in spec["containers"]:
        own: list[dict[str, Any]] = container.get("env", [])
        own_names = {e["name"] for e in own}
        ours: list[dict[str, Any]] = [
            {"name": k, "value": v} for k, v in contract.items() if k not in own_names
        ]
        ours.append(POD_NAME_ENV)
        container["env"] = [*ours, *own]
        # Last: of the sources envFrom lists, the last wins a name they share, so a ConfigMap
        # of the template's cannot override Phalanx's variables; any `env` entry (the
        # template's) wins over every envFrom source, as Kubernetes resolves them.
        container["envFrom"] = [*container.get("envFrom", []), {"configMapRef": {"name": config}}]
        container.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    source = inject(job, spec, settings, agent)
    spec.update(hostname=pod_name, subdomain=service_name(job.metadata.name or ""))
    spec.update(restartPolicy="Never")
    spec.setdefault("serviceAccountName", service_account_name(job.metadata.name or ""))
    _shared_memory(spec)
    _scheduling(job, spec)
    _avoid(spec, avoid_nodes)
    metadata = _metadata(job, pod_name, pod_labels, template_meta)
    annotate(metadata, source)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def standby_pod(
    job: TrainingJob,
    epoch: int,
    index: int,
    settings: BuildSettings,
    avoid_nodes: tuple[str, ...] = (),
    warm: bool = False,
    nodes: int = 1,
    snapshot_bytes: int = 0,
) -> Manifest:
    """Standby pod `index` of `epoch` (its env names a job of `nodes` until it is assigned a
    rank). Once it schedules, capacity for one more node exists and
    the job can grow. A warm one (the job's pods run phalanx-agent, which their reports proved)
    is the template itself with PHALANX_STANDBY=1: its agent stands by with torch imported and
    takes a lost node's rank in place (a hot spare). A cold one only idles on one node pod's
    resources, because any other program would start training with a rank nobody gave it."""
    name = job.metadata.name or ""
    pod_labels = {
        labels.EPOCH: str(epoch),
        labels.NODE_RANK: str(index),
        labels.ROLE: labels.ROLE_STANDBY,
    }
    pod_name = standby_pod_name(name, epoch, index)
    if warm and len(pod_name) <= DNS_LABEL_MAX:  # it is also the hot spare's hostname
        contract = rank_env(job, epoch, 0, nodes, settings) | {env.PHALANX_STANDBY: "1"}
        warm_labels = {**pod_labels, labels.WARM: "true"}
        return _gang_pod(
            job,
            pod_name,
            warm_labels,
            contract,
            avoid_nodes,
            settings,
            snapshot_bytes=snapshot_bytes,
        )
    template_meta, spec = _template(job, snapshot_bytes)
    first = spec["containers"][0]
    container = {
        "name": "standby",
        "image": first["image"],
        "command": list(settings.standby_command),
        "resources": first.get("resources", {}),
    }
    if "securityContext" in first:  # a namespace at the restricted Pod Security level admits
        container["securityContext"] = first["securityContext"]  # it as it admits the template
    keep = ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
            "imagePullSecrets", "runtimeClassName", "securityContext")  # fmt: skip
    spec = {k: v for k, v in spec.items() if k in keep}
    spec.update(containers=[container], restartPolicy="Never", terminationGracePeriodSeconds=0)
    _scheduling(job, spec)
    _avoid(spec, avoid_nodes)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(job, pod_name, pod_labels, template_meta),
        "spec": spec,
    }
