"""Fields that show in the env contract: each one's variable on the node pod, and the setting the
agent, the workers or the reference trainer parse from it (NCCL's own variables are read by NCCL,
so for those the pod's variable is where the effect ends in this repository)."""

from __future__ import annotations

from phalanx.models import TrainingJob, env
from phalanx.trainer.parallel import grid
from tests.unit.spec_effects.build import (
    UNSET,
    Effect,
    Overrides,
    contract,
    library_setting,
    parsed_pod_env,
    pod_var,
    pod_vars,
    trainer_setting,
)
from tests.unit.spec_effects.planner import first_status


def _ranks(job: TrainingJob) -> tuple[str | None, int, int]:
    """Processes per pod as set, as parsed, and the world size the planner gives the epoch."""
    return (
        pod_vars(job).get(env.NPROC_PER_NODE),
        parsed_pod_env(job).nproc_per_node,
        first_status(job).world_size,
    )


def _tensor(job: TrainingJob) -> tuple[str | None, int, int | None]:
    """The tensor degree as set and parsed, and the data-parallel degree that follows from it."""
    parsed = parsed_pod_env(job)
    return (
        pod_vars(job).get(env.PHALANX_TENSOR_PARALLEL),
        parsed.tensor_parallel,
        parsed.data_parallel,
    )


def _pipeline(job: TrainingJob) -> tuple[str | None, int, int, int]:
    """The pipeline degree as set and parsed, the size the planner starts the job at (sizes
    whose world is not a multiple of tensor x pipeline are skipped), and the pipeline stage the
    reference trainer gives the pod's last rank (tests/trainer/test_trajectory.py trains it)."""
    pod = parsed_pod_env(job)
    last = pod.world_size - 1
    return (
        pod_vars(job).get(env.PHALANX_PIPELINE_PARALLEL),
        pod.pipeline_parallel,
        first_status(job).nodes,
        grid(last, pod.world_size, pod.tensor_parallel, pod.pipeline_parallel).pp_rank,
    )


DEFAULT_TRAINER: Overrides = {"trainer": {}}
"""`spec.trainer` present with every setting at its default."""
DEFAULT_NCCL: Overrides = {"nccl": {}}
"""`spec.nccl` present with every setting at its default."""
URL = "s3://bucket/j"

EFFECTS: dict[str, Effect] = {
    "nprocPerNode": Effect({"nprocPerNode": 2}, _ranks, ("2", 2, 8)),
    "parallelism.tensor": Effect(
        {"nprocPerNode": 2, "parallelism.tensor": 2}, _tensor, ("2", 2, 4), {"nprocPerNode": 2}
    ),
    "parallelism.pipeline": Effect(
        {"nprocPerNode": 2, "replicas.desired": 3, "parallelism.pipeline": 4},
        _pipeline,
        ("4", 4, 2, 3),
        {"nprocPerNode": 2, "replicas.desired": 3},
    ),
    "checkpoint.dir": Effect(
        {"checkpoint.dir": "/mnt/ckpt"},
        contract(env.PHALANX_CHECKPOINT_DIR, "checkpoint_dir"),
        ("/mnt/ckpt", "/mnt/ckpt"),
        {"checkpoint.dir": UNSET, "checkpoint.url": URL},
    ),
    "checkpoint.url": Effect(
        {"checkpoint.dir": UNSET, "checkpoint.url": URL},
        contract(env.PHALANX_CHECKPOINT_URL, "checkpoint_url"),
        (URL, URL),
    ),
    "checkpoint.intervalSteps": Effect(
        {"checkpoint.intervalSteps": 25},
        library_setting(env.PHALANX_CHECKPOINT_INTERVAL_STEPS, "interval_steps"),
        ("25", 25),
    ),
    "checkpoint.intervalSeconds": Effect(
        {"checkpoint.intervalSeconds": 600},
        library_setting(env.PHALANX_CHECKPOINT_INTERVAL_SECONDS, "interval_seconds"),
        ("600", 600),
    ),
    "checkpoint.keep": Effect(
        {"checkpoint.keep": 5}, library_setting(env.PHALANX_CHECKPOINT_KEEP, "keep"), ("5", 5)
    ),
    "checkpoint.memoryIntervalSteps": Effect(
        {"checkpoint.memoryIntervalSteps": 0},
        library_setting(env.PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS, "memory_interval_steps"),
        ("0", 0),
    ),
    "checkpoint.memoryOverheadPercent": Effect(
        {"checkpoint.memoryOverheadPercent": 0},
        library_setting(env.PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT, "memory_overhead_percent"),
        ("0", 0),
    ),
    "checkpoint.async": Effect(
        {"checkpoint.async": False},
        library_setting(env.PHALANX_CHECKPOINT_ASYNC, "async_save"),
        ("false", False),
    ),
    "trainer.globalBatchSize": Effect(
        {"trainer.globalBatchSize": 64},
        trainer_setting("global_batch_size"),
        ("64", 64),
        DEFAULT_TRAINER,
    ),
    "trainer.sharding": Effect(
        {"trainer.sharding": "fsdp"},
        trainer_setting("sharding"),
        ("fsdp", "fsdp"),
        DEFAULT_TRAINER,
    ),
    "trainer.mixedPrecision": Effect(
        {"trainer.mixedPrecision": "bf16"},
        trainer_setting("mixed_precision"),
        ("bf16", "bf16"),
        DEFAULT_TRAINER,
    ),
    "trainer.activationCheckpointing": Effect(
        {"trainer.activationCheckpointing": True},
        trainer_setting("activation_checkpointing"),
        ("true", True),
        DEFAULT_TRAINER,
    ),
    "trainer.steps": Effect(
        {"trainer.steps": 7}, trainer_setting("steps"), ("7", 7), DEFAULT_TRAINER
    ),
    "trainer.seed": Effect({"trainer.seed": 7}, trainer_setting("seed"), ("7", 7), DEFAULT_TRAINER),
    "nccl.socketIfname": Effect(
        {"nccl.socketIfname": "eth1"}, pod_var("NCCL_SOCKET_IFNAME"), "eth1", DEFAULT_NCCL
    ),
    "nccl.ibHca": Effect({"nccl.ibHca": "mlx5_0"}, pod_var("NCCL_IB_HCA"), "mlx5_0", DEFAULT_NCCL),
    "nccl.debug": Effect({"nccl.debug": "INFO"}, pod_var("NCCL_DEBUG"), "INFO", DEFAULT_NCCL),
    "nccl.env": Effect(
        {"nccl.env": {"NCCL_ALGO": "Ring"}}, pod_var("NCCL_ALGO"), "Ring", DEFAULT_NCCL
    ),
    "nccl.timeoutSeconds": Effect(
        {"nccl.timeoutSeconds": 60},
        library_setting(env.PHALANX_COLLECTIVE_TIMEOUT_SECONDS, "collective_timeout_seconds"),
        ("60", 60),
        DEFAULT_NCCL,
    ),
}
