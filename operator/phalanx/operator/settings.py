"""Operator settings, from `PHALANX_OPERATOR_*` environment variables or command-line flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from phalanx.operator.builder import BuildSettings
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
    writes wait on the API server, not on the CPU: at 300 new jobs on 2 cores, 16 threads left
    reconciles queued long enough (plans 30 s stale) to create 116 pods twice (409s); 64 none,
    and the pods were all created 14 % sooner (bench/controlplane.py)."""

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

    def planner_config(self) -> PlannerConfig:
        return PlannerConfig(
            grow_cooldown_seconds=self.grow_cooldown_seconds,
            excluded_namespaces=frozenset(() if self.namespaces else self.excluded_namespaces),
            straggler_min_window=self.straggler_min_window,
        )
