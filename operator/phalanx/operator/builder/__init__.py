"""Pure builders: a TrainingJob plus an epoch's decisions in, Kubernetes manifests (dicts) out.

Why one place: like Kubeflow Trainer's runtime builder, everything that shapes a node pod (env
contract, labels, DNS, scheduling) is decided here and nowhere else, and tests render a pod
without a cluster.
"""

from phalanx.models.names import (
    env_config_map_name,
    lease_name,
    node_pod_name,
    service_account_name,
)
from phalanx.operator.builder.children import (
    assignment_lease,
    disruption_budget,
    env_config_map,
    headless_service,
    heartbeat_lease,
    pod_group,
    report_leases,
    report_shard_count,
    role,
    role_binding,
    service_account,
)
from phalanx.operator.builder.env import BuildSettings, job_env, pod_address, pod_env, rank_env
from phalanx.operator.builder.pods import node_pod, standby_pod

__all__ = [
    "BuildSettings",
    "assignment_lease",
    "disruption_budget",
    "env_config_map",
    "env_config_map_name",
    "headless_service",
    "heartbeat_lease",
    "job_env",
    "lease_name",
    "node_pod",
    "node_pod_name",
    "pod_address",
    "pod_env",
    "pod_group",
    "rank_env",
    "report_leases",
    "report_shard_count",
    "role",
    "role_binding",
    "service_account",
    "service_account_name",
    "standby_pod",
]
