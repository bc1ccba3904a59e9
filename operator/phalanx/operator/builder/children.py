"""The objects a job owns besides its pods: headless Service, the ConfigMap of its pods' common
variables, heartbeat and assignment Leases
(and, past 8 node pods, more Leases for the agents' reports), the ServiceAccount +
Role + RoleBinding that let its pods update the heartbeat and report Leases and read the
assignment Lease, and nothing else, and the PodDisruptionBudget of its node pods."""

from __future__ import annotations

from typing import Any

from phalanx.models import labels
from phalanx.models.job import API_VERSION, KIND, TrainingJob
from phalanx.models.names import (
    MAX_NODES,
    assignment_lease_name,
    disruption_budget_name,
    env_config_map_name,
    lease_name,
    pod_group_name,
    service_account_name,
    service_name,
)
from phalanx.models.report_shards import shard_lease, shards_for
from phalanx.operator.builder.env import BuildSettings, job_env

Manifest = dict[str, Any]


def owner_reference(job: TrainingJob) -> Manifest:
    """Makes the job the controller of a child, so deleting the job deletes it (GC)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(
    job: TrainingJob, name: str, extra_labels: dict[str, str] | None = None
) -> Manifest:
    """Name, namespace, job label and owner reference of a child object."""
    return {
        "name": name,
        "namespace": job.metadata.namespace,
        "labels": {labels.JOB: job.metadata.name or "", **(extra_labels or {})},
        "ownerReferences": [owner_reference(job)],
    }


def headless_service(job: TrainingJob, master_port: int) -> Manifest:
    """Gives each node pod a DNS name (`<pod>.<job>.<ns>.svc`) even before it is Ready. It
    selects every pod of the job: a hot spare that takes rank 0 is where the rendezvous is."""
    name = job.metadata.name or ""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(job, service_name(name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.JOB: name},
            "ports": [{"name": "rendezvous", "port": master_port, "targetPort": master_port}],
        },
    }


def env_config_map(job: TrainingJob, settings: BuildSettings) -> Manifest:
    """The variables all the job's node pods get alike (`env.job_env`), which each takes by
    envFrom. Kept as the spec says while the job runs (`execute.py _apply_env`): a pod reads
    it when its containers start."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata(job, env_config_map_name(job.metadata.name or "")),
        "data": job_env(job, settings),
    }


def disruption_budget(job: TrainingJob) -> Manifest:
    """Holds voluntary evictions (`kubectl drain`, the cluster autoscaler's scale-down) off the
    job's node pods. A drain cordons the node first: the operator sees that, lets the ranks on it
    save their step, moves them to a spare or shrinks (`planner.disruption`) and deletes the
    pod, which no budget holds; the drain's retried eviction then finds the pod gone. A pod that
    is not Ready is evicted at once (AlwaysAllow): no work of its own is saved by waiting. Hot
    spares are not covered: they have no work to save.

    `minAvailable` is MAX_NODES, more node pods than any job has, so no healthy node pod's
    eviction is allowed. Not `maxUnavailable: 0`: that (and any percentage) makes the disruption
    controller read the pods' owner's scale subresource, whose replicas field
    (spec.replicas.desired) is optional, and it warns on every sync while that is unset."""
    name = job.metadata.name or ""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": child_metadata(job, disruption_budget_name(name)),
        "spec": {
            "minAvailable": MAX_NODES,
            "selector": {"matchLabels": {labels.JOB: name, labels.ROLE: labels.ROLE_NODE}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def _lease(job: TrainingJob, name: str, spec: Manifest) -> Manifest:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": child_metadata(job, name),
        "spec": spec,
    }


def heartbeat_lease(job: TrainingJob) -> Manifest:
    """The Lease node rank 0's agent renews with its progress (also shard 0 of the reports)."""
    return _lease(job, lease_name(job.metadata.name or ""), {"leaseDurationSeconds": 30})


def report_shard_count(job: TrainingJob) -> int:
    """How many report Leases the job's pods need: for every rank up to spec.replicas.max and
    every standby index, and for the pods its status names (a pod made before the job shrank
    carries over with the rank in its name)."""
    status = job.status
    names = [*status.current.ranks, *status.current.standbys] if status is not None else []
    return shards_for(max(job.spec.replicas.max, job.spec.spares), names)


def report_leases(job: TrainingJob) -> list[Manifest]:
    """The report Leases past the heartbeat Lease (shard 0): none for a job of up to
    `SHARED_RANKS` pods."""
    heartbeat = lease_name(job.metadata.name or "")
    return [
        _lease(job, shard_lease(heartbeat, number), {})
        for number in range(1, report_shard_count(job))
    ]


def assignment_lease(job: TrainingJob) -> Manifest:
    """The Lease whose annotation tells the pods' agents who runs each epoch (in place)."""
    return _lease(job, assignment_lease_name(job.metadata.name or ""), {})


def service_account(job: TrainingJob) -> Manifest:
    name = service_account_name(job.metadata.name or "")
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": child_metadata(job, name)}


def role(job: TrainingJob) -> Manifest:
    """Allows updating only this job's heartbeat and report Leases (progress, agents' reports)
    and reading and watching only its assignment Lease."""
    name = job.metadata.name or ""
    reports = [shard_lease(lease_name(name), n) for n in range(report_shard_count(job))]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": child_metadata(job, service_account_name(name)),
        "rules": [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": reports,
                "verbs": ["get", "update", "patch"],
            },
            {  # a watch of one object by name (fieldSelector metadata.name) needs list + watch
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [assignment_lease_name(name)],
                "verbs": ["get", "list", "watch"],
            },
        ],
    }


def role_binding(job: TrainingJob) -> Manifest:
    name = service_account_name(job.metadata.name or "")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": child_metadata(job, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.metadata.namespace}],
    }


PODGROUP_GROUP = "scheduling.x-k8s.io"
PODGROUP_VERSION = "v1alpha1"
PODGROUP_PLURAL = "podgroups"
PODGROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group(job: TrainingJob, min_member: int) -> Manifest:
    """A scheduler-plugins PodGroup: the job's node pods schedule all together or not at all.
    One per job, not per epoch: after an in-place restart the pods carried over keep their
    label, and a replacement must join the group they are in (with one group per epoch it
    waited alone for a quorum that never came). `min_member` follows the epoch's size."""
    name = job.metadata.name or ""
    return {
        "apiVersion": f"{PODGROUP_GROUP}/{PODGROUP_VERSION}",
        "kind": "PodGroup",
        "metadata": child_metadata(job, pod_group_name(name)),
        "spec": {
            "minMember": min_member,
            "scheduleTimeoutSeconds": job.spec.failure_policy.schedule_timeout_seconds,
        },
    }
