"""Operator settings, from `PHALANX_OPERATOR_*` environment variables or command-line flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from phalanx.operator.builder import BuildSettings
from phalanx.operator.cluster.leader import ElectionTimes
from phalanx.operator.planner import PlannerConfig


class OperatorSettings(BaseSettings):
    """How the operator runs. Every field is also a flag: `--metrics-port 9090`."""

    model_config = SettingsConfigDict(
        env_prefix="PHALANX_OPERATOR_",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        frozen=True,
        use_attribute_docstrings=True,
    )

    namespaces: list[str] = Field(default_factory=list)
    """Namespaces to watch; empty means all (cluster-wide)."""

    excluded_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-node-lease", "kube-public", "kube-system"]
    )
    """Cluster-wide only: namespaces where a TrainingJob fails at once (NamespaceExcluded) and
    nothing is created. The system namespaces by default; `[]` to run jobs anywhere. Ignored when
    `namespaces` lists the namespaces to watch: those are what was asked for."""

    kubeconfig: Path | None = None
    """Kubeconfig to use; default: in-cluster service account, else $KUBECONFIG."""

    nccl_defaults: dict[str, str] = Field(default_factory=dict)
    """Cluster NCCL defaults, e.g. {"NCCL_SOCKET_IFNAME": "eth0"}; a job's spec.nccl wins."""

    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 8080
    """Port of the Prometheus /metrics endpoint; 0 disables it."""

    liveness_endpoint: str | None = "http://0.0.0.0:8081/healthz"
    """kopf's liveness probe endpoint; empty disables it."""

    master_port: Annotated[int, Field(ge=1, le=65535)] = 29500
    """Port of the rendezvous (MASTER_PORT) in node pods."""

    cluster_domain: str = "cluster.local"
    """DNS suffix of the cluster, used in MASTER_ADDR."""

    grow_cooldown_seconds: Annotated[float, Field(ge=0)] = 60.0
    """Least time an epoch runs before the job grows again."""

    straggler_min_window: Annotated[int, Field(ge=1)] = 10
    """Steps a heartbeat's window must cover before stragglers are judged."""

    resync_seconds: Annotated[float, Field(gt=0)] = 30.0
    """Reconcile each job at least this often even when nothing happens."""

    api_workers: Annotated[int, Field(ge=1, le=256)] = 64
    """Threads for Kubernetes API calls, so reconciles of many jobs overlap. Each reconcile's
    writes wait on the API server, not on the CPU: too few threads left reconciles queued long
    enough to plan from stale state and create pods twice (docs/figures.md, "API threads"). A
    reconcile plans only once one of them is free (`Reconciler`), and the API client keeps a
    connection for each."""

    malloc_arenas: Annotated[int, Field(ge=0, le=1024)] = 2
    """Most glibc malloc arenas the process may use (`allocator.cap_arenas`); 0 keeps glibc's
    default of 8 per core, which left free space in up to 16 arenas for the API threads."""

    malloc_mmap_threshold: Annotated[int, Field(ge=0, le=32 * 2**20)] = 128 * 2**10
    """Bytes from which glibc maps a block on its own, fixed (`allocator.fix_mmap_threshold`);
    0 keeps glibc's threshold, which rises as large blocks are freed and then leaves large
    buffers' free space resident in the arenas (docs/figures.md, "The operator's memory")."""

    leader_election: bool = False
    """Act only while holding the leader Lease (`leader_lease`), so that replicas stand by; the
    chart turns it on. Off: this operator acts at once and alone (the local backend, tests)."""

    leader_lease: str = "phalanx-operator-leader"
    """Name of the leader Lease, in `leader_namespace`."""

    leader_namespace: str | None = None
    """Namespace of the leader Lease; unset: the pod's own (POD_NAMESPACE, else the service
    account's), else `default`."""

    leader_identity: str | None = None
    """This candidate's name in the Lease; unset: the host name (the pod's name)."""

    leader_owner: str | None = None
    """A ServiceAccount in the Lease's namespace that owns the leader Lease, so that deleting it
    deletes the Lease (the chart names the operator's own: `helm uninstall` leaves no Lease)."""

    leader_lease_seconds: Annotated[float, Field(ge=2, le=300)] = 10.0
    """A leader unheard of this long is replaced: the takeover time after a crash (a clean stop
    hands over at once). It renews every second and stops acting when it could not for 70 % of
    this."""

    unhealthy_node_labels: dict[str, list[str]] = Field(default_factory=dict)
    """Node labels whose values mean that the node is being taken away, e.g.
    {"sagemaker.amazonaws.com/node-health-status": ["UnschedulablePendingReplacement",
    "UnschedulablePendingReboot"]}: a job moves its ranks off such a node as off a cordoned one
    (checkpoint, then its spare or a shrink), before the pods are evicted. Cordons and NoExecute
    taints (other than the node controller's) always count."""

    standby_command: list[str] = Field(default_factory=lambda: ["sleep", "infinity"])
    """Command of standby pods, which hold capacity for growing back."""

    agent_image: str | None = None
    """Image whose init container injects the agent into node pods (the control-plane image,
    which holds it); unset: none is injected, and pods say so (`phalanx.dev/agent`)."""

    agent_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    """Pull policy of that init container; unset: Kubernetes' default for its tag."""

    def build_settings(self) -> BuildSettings:
        return BuildSettings(
            master_port=self.master_port,
            cluster_domain=self.cluster_domain,
            nccl_defaults=dict(self.nccl_defaults),
            standby_command=tuple(self.standby_command),
            agent_image=self.agent_image,
            agent_image_pull_policy=self.agent_image_pull_policy,
        )

    def unhealthy_labels(self) -> dict[str, frozenset[str]]:
        return {key: frozenset(values) for key, values in self.unhealthy_node_labels.items()}

    def election_times(self) -> ElectionTimes:
        lease = self.leader_lease_seconds
        return ElectionTimes(lease=lease, renew_deadline=0.7 * lease, retry=min(1.0, lease / 5))

    def planner_config(self) -> PlannerConfig:
        return PlannerConfig(
            grow_cooldown_seconds=self.grow_cooldown_seconds,
            excluded_namespaces=frozenset(() if self.namespaces else self.excluded_namespaces),
            straggler_min_window=self.straggler_min_window,
        )
