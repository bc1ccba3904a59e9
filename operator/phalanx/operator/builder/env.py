"""The env contract a node pod gets (design §4): rendezvous, ranks, Phalanx's own variables, and
NCCL settings merged from the cluster defaults and the job (the job wins).

Why RANK and WORLD_SIZE on the pod only with one process per pod: then the pod is the worker, and
a container that runs its script directly (`command: [python, train.py]`, as Kubeflow's
PyTorchJob examples do) finds the variables a launcher would have set, as PyTorchJob sets them.
With more processes per pod, a launcher (the agent, torchrun) sets them per worker, and a value on
the pod would be wrong for every worker but one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from phalanx.models import env
from phalanx.models.job import TrainingJob
from phalanx.models.names import assignment_lease_name, lease_name, node_pod_name, service_name
from phalanx.models.spec import TrainerSettings


@dataclass(frozen=True)
class BuildSettings:
    """Cluster-wide settings the builders need."""

    master_port: int = 29500
    cluster_domain: str = "cluster.local"
    nccl_defaults: Mapping[str, str] = field(default_factory=dict)
    standby_command: tuple[str, ...] = ("sleep", "infinity")
    agent_image: str | None = None
    """The image whose init container copies the agent into node pods (the control-plane
    image); None: no agent is injected."""
    agent_image_pull_policy: str | None = None


def master_addr(
    job: TrainingJob, epoch: int, settings: BuildSettings, master: str | None = None
) -> str:
    """Rank 0's FQDN for this epoch: its own rank-0 pod, or the pod that carried over into
    rank 0 (`master`)."""
    return pod_address(job, master or node_pod_name(job.metadata.name or "", epoch, 0), settings)


def pod_address(job: TrainingJob, pod: str, settings: BuildSettings) -> str:
    """The FQDN of one of the job's pods (its hostname is its name, its subdomain the job's
    headless Service): where rank 0 listens when that pod is rank 0."""
    name, namespace = job.metadata.name or "", job.metadata.namespace or "default"
    return f"{pod}.{service_name(name)}.{namespace}.svc.{settings.cluster_domain}"


def nccl_env(job: TrainingJob, settings: BuildSettings) -> dict[str, str]:
    """Cluster NCCL defaults overlaid with the job's `spec.nccl`."""
    merged = dict(settings.nccl_defaults)
    nccl = job.spec.nccl
    if nccl is not None:
        typed = {
            "NCCL_SOCKET_IFNAME": nccl.socket_ifname,
            "NCCL_IB_HCA": nccl.ib_hca,
            "NCCL_DEBUG": nccl.debug,
        }
        merged.update({k: v for k, v in typed.items() if v is not None})
        merged.update(nccl.env or {})
    return merged


def checkpoint_env(job: TrainingJob) -> dict[str, str]:
    """`spec.checkpoint`'s cadence and `spec.nccl.timeoutSeconds` for the resume library, which
    the reference trainer and any script using `phalanx.resume` read."""
    spec = job.spec
    values = env.checkpoint(
        spec.checkpoint.interval_steps,
        spec.checkpoint.keep,
        spec.checkpoint.async_save,
        spec.checkpoint.memory_interval_steps,
        spec.checkpoint.interval_seconds,
        spec.checkpoint.memory_overhead_percent,
    )
    if spec.nccl is not None and spec.nccl.timeout_seconds is not None:
        values[env.PHALANX_COLLECTIVE_TIMEOUT_SECONDS] = str(spec.nccl.timeout_seconds)
    return values


def trainer_env(job: TrainingJob) -> dict[str, str]:
    """`spec.trainer` as the reference trainer's PHALANX_TRAINER_* settings (other programs
    ignore them)."""
    spec = job.spec
    values: dict[str, object] = {}
    # Unset, `spec.trainer` means its documented defaults, not the trainer's own.
    trainer = spec.trainer or TrainerSettings()
    values |= {
        "GLOBAL_BATCH_SIZE": trainer.global_batch_size,
        "SHARDING": trainer.sharding,
        "MIXED_PRECISION": trainer.mixed_precision,
        "ACTIVATION_CHECKPOINTING": str(trainer.activation_checkpointing).lower(),
        "SEED": trainer.seed,
    }
    if trainer.steps is not None:
        values["STEPS"] = trainer.steps
    return {f"{env.PHALANX_PREFIX}TRAINER_{k}": str(v) for k, v in values.items()}


_RENDEZVOUS_PER_JOB = frozenset(
    name for plain in (env.MASTER_PORT, env.NPROC_PER_NODE) for name in env.spellings(plain)
)
"""The rendezvous variables that no epoch or rank changes (spec.nprocPerNode is immutable)."""


def job_env(job: TrainingJob, settings: BuildSettings) -> dict[str, str]:
    """The variables every node pod of the job gets alike, in every epoch: the job's env
    ConfigMap (`children.env_config_map`), which its pods take by envFrom. Why not on each pod:
    they were most of a pod's variables, and a pod's size is paid by every component that
    stores, decodes or watches it (the API server, etcd, kube-scheduler, the kubelet): pods
    without them were created sooner (docs/figures.md, "Pod size")."""
    spec = job.spec
    name = job.metadata.name or ""
    values = env.with_torchrun_spelling(
        {env.MASTER_PORT: str(settings.master_port), env.NPROC_PER_NODE: str(spec.nproc_per_node)}
    )
    values |= {
        env.PHALANX_JOB: name,
        env.PHALANX_NAMESPACE: job.metadata.namespace or "default",
        env.PHALANX_TENSOR_PARALLEL: str(spec.parallelism.tensor),
        env.PHALANX_PIPELINE_PARALLEL: str(spec.parallelism.pipeline),
        env.PHALANX_HEARTBEAT_LEASE: lease_name(name),
        env.PHALANX_ASSIGNMENT_LEASE: assignment_lease_name(name),
        env.TORCH_NCCL_ASYNC_ERROR_HANDLING: "1",
        **env.elastic(job.metadata.uid or name, spec.failure_policy.max_restarts),
    }
    if spec.failure_policy.hang_timeout_seconds is not None:
        values[env.PHALANX_HANG_TIMEOUT_SECONDS] = str(spec.failure_policy.hang_timeout_seconds)
    if spec.checkpoint.dir is not None:
        values[env.PHALANX_CHECKPOINT_DIR] = spec.checkpoint.dir
    if spec.checkpoint.url is not None:
        values[env.PHALANX_CHECKPOINT_URL] = spec.checkpoint.url
    return {**nccl_env(job, settings), **checkpoint_env(job), **trainer_env(job), **values}


def rank_env(
    job: TrainingJob,
    epoch: int,
    rank: int,
    nodes: int,
    settings: BuildSettings,
    master: str | None = None,
) -> dict[str, str]:
    """The variables of node pod `rank` of `epoch` (of `nodes` pods) that differ between the
    job's pods or epochs: set on the pod itself."""
    spec = job.spec
    address = master_addr(job, epoch, settings, master)
    rendezvous = env.rendezvous(address, settings.master_port, nodes, rank, spec.nproc_per_node)
    values = {k: v for k, v in rendezvous.items() if k not in _RENDEZVOUS_PER_JOB}
    values |= {
        env.PHALANX_EPOCH: str(epoch),
        env.TORCHELASTIC_RESTART_COUNT: env.restart_count(epoch),
        env.PHALANX_DATA_PARALLEL: str(
            env.data_parallel(
                nodes, spec.nproc_per_node, spec.parallelism.tensor, spec.parallelism.pipeline
            )
        ),
    }
    if spec.nproc_per_node == 1:
        values |= env.single_worker(rank, nodes)
    return values


def pod_env(
    job: TrainingJob, epoch: int, rank: int, nodes: int, settings: BuildSettings,
    master: str | None = None,
) -> dict[str, str]:  # fmt: skip
    """Every variable the operator gives node pod `rank` of `epoch` (of `nodes` pods), as its
    container sees them: the job's (`job_env`) and the pod's own (`rank_env`)."""
    return {**job_env(job, settings), **rank_env(job, epoch, rank, nodes, settings, master)}
