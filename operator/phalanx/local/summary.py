"""What a local run reports when it ends: the job's status plus the run's own record.

Why the status model: `phalanx run --output json` is read by scripts that also read a
TrainingJob's status on a cluster, so the same facts are the same fields, defined once (`phase`,
`restarts`, `worldSize`, `lastCheckpoint`...). `recoveries`, `faults` and `events` are what only
the run itself saw.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from phalanx.models.base import KubeModel
from phalanx.models.events import JobEvent
from phalanx.models.heartbeat import Resume, ResumeSource
from phalanx.models.status import TrainingJobStatus
from phalanx.operator.planner import timeline
from phalanx.operator.planner.decision import RecoveredUntil
from phalanx.operator.planner.progress import NOT_REPORTED


class InjectedFault(KubeModel):
    """A failure the run injected (`--kill-node-at`, `--kill-rank`, `--hang-node-at`)."""

    kind: str
    """kill-node, kill-rank, hang-node, hang-rank, slow-node or drain-node."""

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


REPORTED: Final = frozenset(
    {
        "phase", "conditions", "epoch", "nodes", "world_size", "spares", "restarts", "progress",
        "last_checkpoint", "checkpoint_interval_steps", "failures", "lost_seconds", "goodput",
    }
)  # fmt: skip
"""The status fields a run reports. The others are the planner's bookkeeping between reconciles
(`current`, `selector`, `recoveringSince`...): the summary carries them but leaves them out of
its JSON, as it always did."""

_BOOKKEEPING: Final = frozenset(
    key
    for name, info in TrainingJobStatus.model_fields.items()
    if name not in REPORTED
    for key in (name, info.alias or name)
)
"""Their names, and their wire names."""


class RunSummary(TrainingJobStatus):
    """The end of a local run: the job's status, and what the run saw.

    `phase` is Succeeded, Failed, or Suspended after Ctrl-C (resumable); `conditions` are the
    job's at the end. Only `lostSeconds` differs from the status: it is None, not 0, when the
    program reports no steps (its lost work is not known; on a cluster the ProgressReported
    condition says so)."""

    lost_seconds: float | None = 0.0  # type: ignore[assignment]  # None: not measured (above)
    """Wall time lost to failures: recovery plus work since the last checkpoint; None when the
    program reports no steps (its lost work is not known)."""

    job: str
    """The TrainingJob's name."""

    message: str | None = None
    """Why the run ended, when it did not succeed."""

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

    events: list[JobEvent] = Field(default_factory=list)
    """Every decision, in order, each with its time."""

    workdir: str
    """Checkpoints, logs and the heartbeat of the run."""

    @model_serializer(mode="wrap")
    def _without_bookkeeping(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The summary as dumped: the reported status fields and the run's own."""
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if key not in _BOOKKEEPING}
