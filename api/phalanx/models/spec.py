"""`TrainingJob.spec`: what the user asks for. Every rule that the object alone can decide is
stated here, once, for both the API server and Python (see `phalanx.models.rules`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from phalanx.models.base import SpecModel, object_default
from phalanx.models.failure_policy import FailurePolicy
from phalanx.models.memory import MemorySettings
from phalanx.models.names import MAX_NODES
from phalanx.models.rules import CelRule
from phalanx.models.template import PodTemplate

MAX_PATH = 4096


class Replicas(SpecModel):
    """How many node pods the job may run: the operator picks a size within `min..desired`.
    Reaches: every program."""

    __cel_rules__ = (
        CelRule(
            rule="self.min <= self.max",
            message="spec.replicas.min must be less than or equal to spec.replicas.max",
            field_path=".min",
            check=lambda r: r.min <= r.max,
        ),
        CelRule(
            rule="!has(self.desired) || (self.desired >= self.min && self.desired <= self.max)",
            message=(
                "spec.replicas.desired must be within spec.replicas.min..spec.replicas.max "
                "(kubectl scale sets it)"
            ),
            field_path=".desired",
            check=lambda r: r.desired is None or r.min <= r.desired <= r.max,
        ),
    )

    min: Annotated[int, Field(ge=1)]
    """Fewest node pods the job can train with. Below it, the job waits for capacity."""

    max: Annotated[int, Field(ge=1, le=MAX_NODES)]
    """Most node pods the job uses. The job grows back to this when capacity returns. At most
    100000, so that node ranks fit in the pods' hostnames."""

    desired: Annotated[int | None, Field(ge=1)] = None
    """Node pods wanted now, within min..max; unset means max. The scale subresource
    (`kubectl scale tj/NAME --replicas=N`) sets it."""


class Parallelism(SpecModel):
    """Model-parallel group sizes. Data parallelism is what is left: world / (tensor x pipeline).
    The planner picks only sizes whose world they divide; the pods get them as
    PHALANX_TENSOR_PARALLEL and PHALANX_PIPELINE_PARALLEL, which the reference trainer shards by.
    Reaches: every program."""

    tensor: Annotated[int, Field(ge=1)] = 1
    """Tensor-parallel degree. A tensor group lives inside one pod, so it divides nprocPerNode."""

    pipeline: Annotated[int, Field(ge=1)] = 1
    """Pipeline-parallel degree."""


CHECKPOINT_URL_PATTERN: Final = (
    r"^(?:(?:s3|gs|gcs)://[a-z0-9][a-z0-9._-]{1,221}(?:/\S*)?|file:///\S+)$"
)
"""A checkpoint URL Phalanx can resume from: an S3 or GCS bucket (and prefix), or a file path."""


class Checkpoint(SpecModel):
    """Where and how often the job saves sharded checkpoints it can resume from. The location
    goes to every pod (PHALANX_CHECKPOINT_DIR or _URL); the cadence and retention reach the
    programs that read them: the reference trainer and any script that saves with
    `phalanx.resume`. Other programs keep their own, which `GET .../checkpoints` and
    status.checkpointIntervalSteps show as they report it.
    Reaches: the reference trainer, scripts using phalanx.resume."""

    __cel_rules__ = (
        CelRule(
            rule="has(self.dir) != has(self.url)",
            message="spec.checkpoint must set exactly one of dir or url",
            check=lambda c: (c.dir is None) != (c.url is None),
        ),
    )

    dir: Annotated[str | None, Field(min_length=1, max_length=MAX_PATH)] = None
    """Directory inside the node pods (a shared volume, e.g. an RWX PVC) or, locally, on disk:
    PHALANX_CHECKPOINT_DIR on every pod (`$(PHALANX_CHECKPOINT_DIR)` in a command).
    Reaches: every program."""

    url: Annotated[
        str | None, Field(min_length=1, max_length=MAX_PATH, pattern=CHECKPOINT_URL_PATTERN)
    ] = None
    """fsspec URL of the checkpoint location: s3://bucket/prefix (S3 and S3-compatible stores,
    through s3fs), gs://bucket/prefix (Google Cloud Storage, through gcsfs), or file:///path.
    PHALANX_CHECKPOINT_URL on every pod. Phalanx's image has both filesystems; a job whose own
    image lacks the one its URL needs is told so by its CheckpointStorage condition before it
    trains. Credentials reach the pods the ecosystem's way: env from a Secret
    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for an S3-compatible store;
    GOOGLE_APPLICATION_CREDENTIALS) or the pod's service account's workload identity.
    Reaches: every program."""

    interval_steps: Annotated[int, Field(ge=1)] = 100
    """Save every this many training steps."""

    interval_seconds: Annotated[int | None, Field(ge=1)] = None
    """Also save when this many seconds have passed since the last save (the ranks agree on
    it in one small collective every step)."""

    keep: Annotated[int, Field(ge=1)] = 3
    """How many valid checkpoints to keep; the newest valid one is never deleted."""

    memory_interval_steps: Annotated[int, Field(ge=0)] = 10
    """Also snapshot each rank's state into its pod's memory every this many steps (0: never),
    under the agent, which gives each pod a memory directory, and each sharded rank's into a
    buddy pod's too. A restart resumes from memory (its pod's, or a peer's for what it lacks)
    when that is not older than storage, so a failure costs at most the steps since the last
    snapshot. The host memory it takes (`phalanx plan`) is added to each pod's memory request.
    A snapshot costs a step a state dict and a copy of the state into host memory (117.5 M
    parameters on 2 CPU cores: about 0.1 s), hence 10 rather than 1; a checkpoint at a
    snapshot's step is written from the snapshot's copy (and has a snapshot for it). The most
    frequent cadence: see memoryOverheadPercent."""

    memory_overhead_percent: Annotated[int, Field(ge=0, le=100)] = 1
    """At most this share of training time blocked by memory snapshots: when a snapshot costs
    more than this percent of the time the steps between snapshots take, the job snapshots
    less often (every 2, 3, ... times memoryIntervalSteps), measured again at each snapshot
    (CheckFreq's bounded overhead). 0: exactly every memoryIntervalSteps, whatever it costs."""

    async_save: bool = Field(default=True, alias="async")
    """Save in the background so training is blocked only while the state is staged."""


class TrainerSettings(SpecModel):
    """Settings for the reference trainer in the Phalanx trainer image. Other scripts ignore it.
    Reaches: the reference trainer."""

    global_batch_size: Annotated[int, Field(ge=1)] = 32
    """Samples per optimizer step, held constant at every world size."""

    sharding: Literal["ddp", "fsdp", "fsdp-grad-op", "hsdp"] = "ddp"
    """Data-parallel strategy: DDP, FSDP2 full shard, FSDP2 shard-grad-op, or HSDP (shard inside
    a pod, replicate across pods)."""

    mixed_precision: Literal["none", "bf16", "fp16"] = "none"
    """Mixed-precision mode; fp16 uses dynamic loss scaling."""

    activation_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""

    steps: Annotated[int | None, Field(ge=1)] = None
    """Total optimizer steps; unset, the reference trainer's default (100)."""

    seed: Annotated[int, Field(ge=0)] = 0
    """Seed for model initialisation and data order."""


class Nccl(SpecModel):
    """NCCL settings for the workers, merged over the operator's cluster defaults (job wins), as
    the NCCL_* variables NCCL itself reads. Reaches: every program."""

    __cel_rules__ = (
        CelRule(
            rule="!has(self.env) || self.env.all(k, k.startsWith('NCCL_'))",
            message="spec.nccl.env keys must start with NCCL_",
            field_path=".env",
            check=lambda n: all(k.startswith("NCCL_") for k in n.env or {}),
        ),
    )

    socket_ifname: Annotated[str | None, Field(min_length=1, max_length=256)] = None
    """NCCL_SOCKET_IFNAME: network interfaces for bootstrap and socket transport."""

    ib_hca: Annotated[str | None, Field(min_length=1, max_length=256)] = None
    """NCCL_IB_HCA: InfiniBand adapters to use."""

    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] | None = None
    """NCCL_DEBUG level."""

    timeout_seconds: Annotated[int | None, Field(ge=1)] = None
    """The process group's collective timeout once training runs (after the first step);
    shorter finds a hung peer sooner. torch reads no variable for it, so the resume library sets
    it (300 s unset); other programs keep torch's own (10 min with NCCL, 30 min with gloo), and
    the agent's hang detection covers those that report progress or stop.
    Reaches: the reference trainer, scripts using phalanx.resume."""

    env: Annotated[dict[str, str] | None, Field(max_length=64)] = None
    """Other NCCL_* variables, passed as they are."""


class AgentSettings(SpecModel):
    """Phalanx's agent in the node pods, for any image: it launches the pod's workers and gives
    them in-place restarts, hot spares, start-up and hang detection, and progress reports."""

    inject: bool = True
    """Run the first container's `command` (and its `args`, unchanged) under the Phalanx agent,
    which an init container copies into the pod: one file that needs only the image's Python
    (3.9 or later), nothing installed. It needs `command` in the template: the operator cannot
    see an image's entrypoint, so with `args` alone the image's entrypoint runs as it is (the
    Phalanx trainer image's is the agent). A `torchrun` command runs its script with the agent
    as the pod's launcher. With several processes per pod, only a Python or torchrun command
    runs under it (a shell script may start the pod's workers itself). false: the command runs
    bare, and gets no in-place restart, hot spare or hang detection. Each pod's
    `phalanx.dev/agent` annotation says which applies. The operator injects only where it is
    given an agent image (the chart's `operator.agentInjection.enabled`)."""

    python: Annotated[str, Field(min_length=1, max_length=MAX_PATH)] = "python3"
    """The image's Python that runs the injected agent and its workers: a name on the image's
    PATH or an absolute path (`/opt/conda/bin/python`)."""


class TrainingJobSpec(SpecModel):
    """What the user asks for: a gang of node pods that trains, checkpoints, survives failures."""

    __cel_rules__ = (
        CelRule(
            rule="self.nprocPerNode % self.parallelism.tensor == 0",
            message=(
                "spec.parallelism.tensor must divide spec.nprocPerNode: a tensor-parallel group "
                "must fit inside one pod"
            ),
            field_path=".parallelism.tensor",
            check=lambda s: s.nproc_per_node % s.parallelism.tensor == 0,
        ),
        CelRule(
            rule=(
                "(self.replicas.min * self.nprocPerNode) % "
                "(self.parallelism.tensor * self.parallelism.pipeline) == 0"
            ),
            message=(
                "spec.replicas.min x spec.nprocPerNode must be a multiple of "
                "spec.parallelism.tensor x spec.parallelism.pipeline, so that the data-parallel "
                "degree is an integer"
            ),
            field_path=".replicas.min",
            check=lambda s: (s.replicas.min * s.nproc_per_node) % s.model_parallel_size == 0,
        ),
        CelRule(
            rule=(
                "(self.replicas.max * self.nprocPerNode) % "
                "(self.parallelism.tensor * self.parallelism.pipeline) == 0"
            ),
            message=(
                "spec.replicas.max x spec.nprocPerNode must be a multiple of "
                "spec.parallelism.tensor x spec.parallelism.pipeline, so that the data-parallel "
                "degree is an integer"
            ),
            field_path=".replicas.max",
            check=lambda s: (s.replicas.max * s.nproc_per_node) % s.model_parallel_size == 0,
        ),
        CelRule(
            rule="!self.gang || has(self.schedulerName)",
            message=(
                "spec.gang needs spec.schedulerName: the default scheduler places pods one by one "
                "(use a gang scheduler such as scheduler-plugins or Volcano)"
            ),
            field_path=".gang",
            check=lambda s: not s.gang or s.scheduler_name is not None,
        ),
        CelRule(
            rule="self.nprocPerNode == oldSelf.nprocPerNode",
            message="spec.nprocPerNode is immutable: it cannot change after the job is created",
            field_path=".nprocPerNode",
            reason="FieldValueForbidden",
        ),
        CelRule(
            rule="self.parallelism == oldSelf.parallelism",
            message="spec.parallelism is immutable: it cannot change after the job is created",
            field_path=".parallelism",
            reason="FieldValueForbidden",
        ),
        CelRule(
            rule=(
                "(has(self.checkpoint.dir) ? self.checkpoint.dir : '') == "
                "(has(oldSelf.checkpoint.dir) ? oldSelf.checkpoint.dir : '') && "
                "(has(self.checkpoint.url) ? self.checkpoint.url : '') == "
                "(has(oldSelf.checkpoint.url) ? oldSelf.checkpoint.url : '')"
            ),
            message=(
                "spec.checkpoint.dir and spec.checkpoint.url are immutable: a job's checkpoints "
                "cannot move after it is created"
            ),
            field_path=".checkpoint",
            reason="FieldValueForbidden",
        ),
    )

    replicas: Replicas
    """Node pod counts: the elastic range and the desired size."""

    nproc_per_node: Annotated[int, Field(ge=1)] = 1
    """Worker processes per node pod, usually its GPU count: the agent (or torchrun) starts
    that many. Immutable. Reaches: every program."""

    parallelism: Parallelism = object_default(Parallelism)
    """Tensor and pipeline parallel degrees. Immutable."""

    template: PodTemplate
    """Template of the node pods. Reaches: every program."""

    checkpoint: Checkpoint
    """Checkpoint location and cadence. The location is immutable."""

    trainer: TrainerSettings | None = None
    """Settings for the reference trainer, if the job runs it."""

    failure_policy: FailurePolicy = object_default(FailurePolicy)
    """Restart budgets, backoff and failure detection."""

    nccl: Nccl | None = None
    """NCCL settings, merged over the cluster defaults."""

    gang: bool = False
    """Schedule each epoch all-or-nothing: the job's PodGroup (scheduler-plugins'
    scheduling.x-k8s.io) with minMember = the epoch's node count, which the pods of every epoch
    join (a replacement joins its carried-over peers), for the gang scheduler named in
    schedulerName (required). Where the cluster serves no PodGroup, the job runs without one and
    says so in a GangSchedulingUnavailable event. Reaches: every program."""

    scheduler_name: Annotated[str | None, Field(min_length=1, max_length=MAX_PATH)] = None
    """Scheduler for the node pods, e.g. scheduler-plugins or Volcano for gang scheduling.
    Reaches: every program."""

    priority_class_name: Annotated[str | None, Field(min_length=1, max_length=MAX_PATH)] = None
    """PriorityClass of the node pods. Reaches: every program."""

    suspend: bool = False
    """Suspended jobs have no pods; resuming starts a new epoch from the last checkpoint.
    Reaches: every program."""

    ttl_seconds_after_finished: Annotated[int | None, Field(ge=0)] = None
    """Delete the job this long after it succeeds or fails; unset keeps it.
    Reaches: every program."""

    active_deadline_seconds: Annotated[int | None, Field(ge=1)] = None
    """Fail the job when it has been active for this long. Reaches: every program."""

    spares: Annotated[int, Field(ge=0)] = 0
    """Hot standby pods kept ready to replace a failed node quickly: each runs an agent, warm,
    that takes a failed node's rank when the operator assigns it. For a program not under the
    agent (injection off, an image without Python) they are cold: they only hold a node's
    resources for a replacement pod, and take no rank. Reaches: programs under the agent."""

    agent: AgentSettings = object_default(AgentSettings)
    """Whether the node pods' command runs under Phalanx's agent, injected into any image.
    Reaches: every program."""

    memory: MemorySettings | None = None
    """GPU memory and the model's shape: the job never shrinks below the smallest size that
    fits, and one that fits at no size in min..max fails at once (`phalanx plan` shows why).
    Reaches: every program."""

    @property
    def model_parallel_size(self) -> int:
        """Ranks in one model replica: tensor x pipeline."""
        return self.parallelism.tensor * self.parallelism.pipeline

    @property
    def desired_nodes(self) -> int:
        """The node count wanted now: `replicas.desired`, or max when unset."""
        return self.replicas.desired if self.replicas.desired is not None else self.replicas.max
