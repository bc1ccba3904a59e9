"""The heartbeat the agent on node rank 0 publishes and the operator reads (design §5).

Why one model: it travels as JSON in an annotation of the job's Lease (or, locally, in a file);
both the writer (trainer) and the reader (operator, local backend) validate it with this model.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from phalanx.models.base import KubeModel
from phalanx.models.status import CheckpointRef


class StartupTimes(KubeModel):
    """When global rank 0 of an epoch reached each stage of its start (wall-clock seconds since
    the Unix epoch): where a restart's seconds go."""

    spawned: float | None = None
    """The agent started the worker process."""
    started: float
    """The worker's program began (after its interpreter and imports)."""
    rendezvous: float
    """The process group formed and the preflight collective passed."""
    built: float | None = None
    """The model, optimizer and data were built (the reference trainer)."""
    loaded: float
    """The checkpoint was loaded (or there was none)."""
    first_step: float
    """The epoch's first training step completed."""


ResumeSource = Literal["memory", "peer", "storage"]
"""Where an epoch's state came from: the ranks' own memory snapshots, a peer's snapshot (a
replica that lost its own), or a checkpoint on storage."""


class Resume(KubeModel):
    """What an epoch resumed from: the step of the state it loaded, or a fresh start."""

    step: Annotated[int | None, Field(ge=0)] = None
    """The step of the state loaded; None: no checkpoint yet, the epoch started from scratch."""
    source: ResumeSource | None = None
    """Where that state came from (None with no state)."""


class SaveInProgress(KubeModel):
    """A checkpoint save that blocks training while it runs (a blocking save, the final one, a
    save waiting for the previous one's upload): the step does not move meanwhile, and the hang
    timeout allows for it."""

    step: Annotated[int, Field(ge=0)]
    """The step being saved."""
    since: datetime
    """When the save began to block (the program's clock)."""


class CheckpointFailure(KubeModel):
    """A checkpoint save that failed (the newest): training went on without it."""

    step: Annotated[int | None, Field(ge=0)] = None
    """The step it was saving (None: not known)."""
    message: Annotated[str, Field(max_length=2048)]
    """The error, as the program saw it (`No space left on device`...)."""
    time: datetime | None = None
    """When it failed."""


class Heartbeat(KubeModel):
    """Progress of one epoch, renewed every few seconds by node rank 0's agent."""

    epoch: Annotated[int, Field(ge=0)]
    """The epoch that wrote it; a stale heartbeat of an earlier epoch is ignored."""

    step: Annotated[int, Field(ge=0)] = 0
    """Last completed optimizer step."""

    data_epoch: Annotated[int, Field(ge=0)] = 0
    """Pass over the data set."""

    samples_per_second: float | None = None
    """Throughput since the previous heartbeat."""

    loss: float | None = None
    """Loss at `step`."""

    rank_step_seconds: list[float] = Field(default_factory=list)
    """Mean step time of each global rank over the last `windowSteps` steps. In synchronous
    training every rank waits for the slowest at each step, so these come out alike."""

    step_seconds: Annotated[float | None, Field(gt=0)] = None
    """Global rank 0's mean step time over its last steps (up to 20): a step time for a program
    that does not gather every rank's (`rankStepSeconds`)."""

    total_steps: Annotated[int | None, Field(ge=1)] = None
    """The steps the program means to train, where it says (for the job's ETA)."""

    rank_compute_seconds: list[float] = Field(default_factory=list)
    """Median time per step each global rank spent on its own work over the window (the
    reference trainer: its forward passes, and the backward passes that reduce no gradients), not
    waiting for peers: where a slow rank stands out. The median, so that a few slow steps (warm-up
    after a restart, a checkpoint's copy, a busy machine's scheduling) do not make a straggler.
    Empty when the program does not time its compute."""

    window_steps: Annotated[int, Field(ge=0)] = 0
    """How many steps `rankStepSeconds` and `rankComputeSeconds` cover."""

    checkpoint: CheckpointRef | None = None
    """Newest committed checkpoint."""

    checkpoint_error: CheckpointFailure | None = None
    """The newest failed save since the last commit; cleared when a save commits."""

    saving: SaveInProgress | None = None
    """A save blocking training now; absent otherwise."""

    saved_at: datetime | None = None
    """When the last blocking save ended (the program's clock). The step stood still through the
    save, so the hang timeout counts again from here: the program's exit after its final save,
    or its next step, gets the whole timeout, not what the save left of it."""

    save_seconds: Annotated[float | None, Field(ge=0)] = None
    """How long the program's last save took, from its start to its commit (an async save's
    upload included): what the next blocking save is expected to take."""

    startup: StartupTimes | None = None
    """How the epoch started, once its first step completed."""

    resumed: Resume | None = None
    """What the epoch resumed from, once its first step completed."""
