"""What a local run reports when it ends: the job's status fields plus the run's own record.

Why status names: `phalanx run --output json` is read by scripts that also read a TrainingJob's
status on a cluster, so the same facts carry the same names (`phase`, `restarts`, `worldSize`,
`lastCheckpoint`...). `recoveries`, `faults` and `events` are what only the run itself saw.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from phalanx.models.base import KubeModel
from phalanx.models.heartbeat import Resume, ResumeSource
from phalanx.models.status import (
    CheckpointRef,
    Condition,
    Failure,
    Phase,
    Progress,
    Restarts,
)
from phalanx.operator.planner import timeline
from phalanx.operator.planner.decision import RecoveredUntil
from phalanx.operator.planner.progress import NOT_REPORTED


class InjectedFault(KubeModel):
    """A failure the run injected (`--kill-node-at`, `--kill-rank`, `--hang-node-at`)."""

    kind: str
    """kill-node, kill-rank or hang-node."""

    time: datetime
    """When it struck."""

    pod: str
    """The node pod it hit."""

    epoch: int = 0
    """The epoch the gang ran when it struck (a pod carried over keeps its first epoch's name)."""

    node: str | None = None
    """The local node the pod ran on."""

    rank: int | None = None
    """The global worker rank, for kill-rank."""

    phase: str | None = None
    """The start-up phase a worker of the pod had just entered, for a fault aimed at one."""


class Recovery(KubeModel):
    """What one recovery resumed from (see `recoveries` for how long it took)."""

    epoch: int
    """The epoch that resumed."""

    from_step: int | None = None
    """The step of the state it loaded; None: no checkpoint yet, it started from the start."""

    source: ResumeSource | None = None
    """memory (the ranks' own snapshots), peer (a replica's snapshot) or storage."""

    steps_redone: int | None = None
    """Steps trained again, at least: the last step seen before the failure less `fromStep`."""

    resume_reported: bool = True
    """Whether the new epoch said what it resumed from (the reference trainer does; a script
    does not). When not, `fromStep` and `source` are unknown, not "from the start"."""

    until: RecoveredUntil = "first-step"
    """What its seconds in `recoveries` reach: the new epoch's first training step, or, for a
    program that reports no steps, the moment its pods all ran (`pods-running`; what it
    resumed from is then not known either)."""

    def describe(self) -> str:
        """`resumed from step 40 (memory), at least 7 steps redone`, `from the start: ...`, or
        what a recovery of a program that reports no steps was measured to."""
        if self.until == "pods-running":
            return f"until the new epoch's pods ran; {NOT_REPORTED}"
        if not self.resume_reported:
            return "what it resumed from is not reported"
        resumed = Resume.model_validate({"step": self.from_step, "source": self.source})
        return timeline.describe_resume(resumed, self.steps_redone)


class RunEvent(KubeModel):
    """A decision of the planner, or a fault or capacity change, as it happened."""

    time: datetime
    """When."""

    reason: str
    """One CamelCase word: Started, Restart, Shrink, Grow, Hang, Succeeded, Capacity..."""

    message: str
    """What happened."""

    type: str = "Normal"
    """Normal or Warning."""


class RunSummary(KubeModel):
    """The end of a local run."""

    job: str
    """The TrainingJob's name."""

    phase: Phase | None
    """Succeeded, Failed, or Suspended after Ctrl-C (resumable)."""

    message: str | None = None
    """Why the run ended, when it did not succeed."""

    epoch: int
    """The last epoch."""

    nodes: int
    """Node count of the last epoch."""

    world_size: int
    """Worker processes of the last epoch."""

    spares: int = 0
    """Hot spares standing by at the end."""

    restarts: Restarts
    """Restarts by failure class."""

    progress: Progress | None = None
    """The last step reached, its loss and throughput."""

    last_checkpoint: CheckpointRef | None = None
    """The newest committed checkpoint, from which a new run resumes."""

    failures: list[Failure] = Field(default_factory=list)
    """The failures acted on (the last ten)."""

    conditions: list[Condition] = Field(default_factory=list)
    """The job's conditions at the end."""

    goodput: float | None = None
    """Share of wall time spent on training that was kept; None when the program reports no
    steps (not measured)."""

    lost_seconds: float | None = 0.0
    """Wall time lost to failures: recovery plus work since the last checkpoint; None when the
    program reports no steps (its lost work is not known)."""

    recoveries: list[float] = Field(default_factory=list)
    """Seconds from each failure (an agent's report of it, else the restart decision) to the
    new epoch's first training step, or, for a program that reports no steps, to its pods
    running (`resumes[i].until` says which)."""

    recovery_parts: list[dict[str, float]] = Field(default_factory=list)
    """Where each recovery's seconds went: detect, assign, start, rendezvous, build, load,
    first step, report (see phalanx.operator.planner.timeline)."""

    resumes: list[Recovery] = Field(default_factory=list)
    """What each recovery resumed from, and the steps it redid (in `recoveries`' order)."""

    duration_seconds: float
    """Wall time of the run."""

    faults: list[InjectedFault] = Field(default_factory=list)
    """Injected failures, when they struck."""

    events: list[RunEvent] = Field(default_factory=list)
    """Every decision, in order."""

    workdir: str
    """Checkpoints, logs and the heartbeat of the run."""
