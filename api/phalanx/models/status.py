"""`TrainingJob.status`: what the operator observed and decided, written once per reconcile.

Why these fields: they answer a user's questions without reading pods or logs: is it training,
at what size, how far along, how often did it fail and why, and what can it resume from.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field

from phalanx.models.base import KubeModel
from phalanx.models.conditions import ConditionType

Phase = Literal["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"]
FailureClass = Literal["application", "infrastructure", "configuration"]
ENDED: Final[tuple[Phase, ...]] = ("Succeeded", "Failed")
"""The phases a job never leaves."""

PROGRESS_REPORTED: Final = ConditionType.PROGRESS_REPORTED
"""The ProgressReported condition type (see `ConditionType`), under the name readers import."""


class Condition(KubeModel):
    """A Kubernetes-style condition (Ready, Suspended, ConfigurationError, Succeeded, Failed...)."""

    type: Annotated[str, Field(min_length=1, max_length=316)]
    """Condition type, e.g. Running, Suspended, Succeeded, Failed, ConfigurationError."""

    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""

    reason: Annotated[str, Field(max_length=1024)] = ""
    """One CamelCase word saying why."""

    message: Annotated[str, Field(max_length=32768)] = ""
    """Human-readable detail."""

    last_transition_time: datetime | None = None
    """When the status last changed."""

    observed_generation: Annotated[int | None, Field(ge=0)] = None
    """The spec generation the condition was computed from."""


class Restarts(KubeModel):
    """Restarts so far, by failure class."""

    application: Annotated[int, Field(ge=0)] = 0
    """Restarts caused by user code failing."""

    infrastructure: Annotated[int, Field(ge=0)] = 0
    """Restarts caused by the platform: OOM, eviction, lost node, hang, pod deleted..."""

    total: Annotated[int, Field(ge=0)] = 0
    """All restarts (shown by `kubectl get tj`)."""


class Progress(KubeModel):
    """Training progress reported by the job's heartbeat."""

    epoch: Annotated[int, Field(ge=0)] = 0
    """The epoch that reported it."""

    step: Annotated[int, Field(ge=0)] = 0
    """Last completed optimizer step."""

    data_epoch: Annotated[int | None, Field(ge=0)] = None
    """Pass over the data set the job is in."""

    samples_per_second: float | None = None
    """Throughput over the last heartbeat interval."""

    loss: float | None = None
    """Training loss at `step`."""

    step_seconds: Annotated[float | None, Field(gt=0)] = None
    """The slowest rank's mean step time, from the last heartbeat that carried one (it may come
    from the previous epoch until this one reports its own); the adaptive hang timeout scales
    with it."""

    updated_at: datetime | None = None
    """When the operator saw the step last advance (a hang is measured from here)."""

    total_steps: Annotated[int | None, Field(ge=1)] = None
    """The steps the program means to train, as it reported them (the reference trainer's
    `trainer.steps`, Lightning's `max_steps`, the Hugging Face Trainer's `max_steps`, a script's
    `phalanx.progress.report(total_steps=...)`); unset when it reports none."""

    eta: datetime | None = None
    """When training is expected to reach `totalSteps`: the steps left times the step time (the
    slowest rank's, else rank 0's), from `updatedAt`. Failures still to come are not in it.
    Unset without `totalSteps` or a step time."""


class CheckpointRef(KubeModel):
    """A committed (valid) checkpoint."""

    step: Annotated[int, Field(ge=0)]
    """Training step the checkpoint holds."""

    path: str
    """Directory or URL of the checkpoint."""

    time: datetime | None = None
    """When it was committed."""

    previous_step: Annotated[int | None, Field(ge=0)] = None
    """Step of the checkpoint the same process committed before this one: the program's own
    cadence, as it reported it (heartbeats are samples and can skip a checkpoint between two)."""


class Failure(KubeModel):
    """One failure the operator acted on."""

    epoch: Annotated[int, Field(ge=0)]
    """Epoch (restart generation) in which it happened."""

    failure_class: FailureClass = Field(alias="class")
    """application, infrastructure or configuration."""

    reason: str
    """What happened, e.g. Error, OOMKilled, Evicted, NodeNotReady, Hang, ImagePullBackOff."""

    pod: str | None = None
    """The pod that failed."""

    node: str | None = None
    """The Kubernetes node it ran on."""

    exit_code: int | None = None
    """The container's exit code, when it exited."""

    message: Annotated[str | None, Field(max_length=4096)] = None
    """Detail, e.g. the pod's termination message."""

    time: datetime | None = None
    """When the operator saw it."""


class EpochState(KubeModel):
    """Bookkeeping of the current epoch, so a restarted operator continues where it stopped."""

    start_time: datetime | None = None
    """When the epoch was decided."""

    launched: bool = False
    """All node pods of the epoch were seen created; from then on a missing pod is a failure."""

    running_time: datetime | None = None
    """When all node pods of the epoch were first seen running."""

    restart_after: datetime | None = None
    """Backoff: the epoch's pods are not created before this time."""

    reason: str | None = None
    """Why the epoch started: Created, Restart, Shrink, Grow, Scale, Drain, Resumed."""

    ranks: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """Pods of earlier epochs that run this one in place (in-place restart), by name: their node
    rank in this epoch."""

    standbys: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    """Standby pods of earlier epochs kept for this one, by name: their index in this epoch."""

    moving: dict[str, str] = Field(default_factory=dict)
    """Node pods of this epoch stopped gracefully because their node is leaving (a planned
    disruption), by name: why. Their end, gone or exited, is no failure: the next epoch runs
    without them."""


class TrainingJobStatus(KubeModel):
    """What the operator observed and decided."""

    phase: Phase | None = None
    """Pending, Running, Restarting, Suspended, Succeeded or Failed."""

    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Latest observations of the job's state."""

    observed_generation: Annotated[int | None, Field(ge=0)] = None
    """The spec generation this status describes."""

    epoch: Annotated[int, Field(ge=0)] = 0
    """Restart generation: every restart or resize starts a new epoch."""

    nodes: Annotated[int, Field(ge=0)] = 0
    """Node pods in the current epoch (the scale subresource's status replicas)."""

    world_size: Annotated[int, Field(ge=0)] = 0
    """Worker processes in the current epoch: nodes x nprocPerNode."""

    spares: Annotated[int, Field(ge=0)] = 0
    """Hot spares ready now: standby pods whose agent waits, warm, to take a failed node's rank."""

    selector: str | None = None
    """Label selector of the job's node pods (for the scale subresource)."""

    restarts: Restarts = Field(default_factory=Restarts)
    """Restarts by failure class."""

    progress: Progress | None = None
    """Training progress from the heartbeat."""

    last_checkpoint: CheckpointRef | None = None
    """Newest committed checkpoint."""

    checkpoint_interval_steps: Annotated[int | None, Field(ge=1)] = None
    """Steps between the program's two newest committed checkpoints, as it reported them: the
    cadence it really saves at, which is spec.checkpoint.intervalSteps only for programs that
    read it (the reference trainer, scripts using phalanx.resume). Unset until one process has
    reported two."""

    failures: list[Failure] = Field(default_factory=list, max_length=10)
    """The most recent failures, newest last."""

    def record_checkpoint(self, checkpoint: CheckpointRef) -> None:
        """A committed checkpoint the program reported: the newest one, and the cadence its
        reporter saw (the step of the one it committed before). Not the difference from the
        last one seen here: heartbeats are samples, and a fast program commits two between
        them. An older or repeated report changes nothing."""
        last = self.last_checkpoint
        if last is not None and checkpoint.step <= last.step:
            return
        previous = checkpoint.previous_step
        if previous is not None and previous < checkpoint.step:
            self.checkpoint_interval_steps = checkpoint.step - previous
        self.last_checkpoint = checkpoint.model_copy()

    current: EpochState = Field(default_factory=EpochState)
    """State of the current epoch."""

    recovering_since: datetime | None = None
    """When the failure being recovered from was seen; cleared at the new epoch's first step."""

    failed_at: datetime | None = None
    """When that failure happened, where an agent reported it (its first worker's exit): the
    start of the recovery's `detect` part. Cleared with `recoveringSince`."""

    consecutive_failures: Annotated[int, Field(ge=0)] = 0
    """Failures since training last made progress; drives the restart backoff."""

    startup_seconds: Annotated[float | None, Field(ge=0)] = None
    """The slowest start-up of the job's epochs so far: from all node pods running to the
    epoch's first step. The adaptive start-up timeout is a multiple of it."""

    lost_seconds: Annotated[float, Field(ge=0)] = 0.0
    """Wall time lost to failures: recovery time plus work since the last checkpoint."""

    avoid_nodes: list[str] = Field(default_factory=list, max_length=32)
    """Kubernetes nodes where stragglers ran; later epochs are kept off them."""

    start_time: datetime | None = None
    """When the job started running, or was last resumed: as a batch Job's, it is reset when a
    suspended job resumes, so activeDeadlineSeconds counts from the last resume (time suspended
    never counts)."""

    active_seconds: Annotated[float, Field(ge=0)] = 0.0
    """Time the job ran before it was last suspended (its goodput's wall time adds the time
    since `start_time`)."""

    completion_time: datetime | None = None
    """When the job succeeded or failed."""

    goodput: Annotated[float | None, Field(ge=0, le=1)] = None
    """Share of wall time spent on training steps that were kept."""
