"""The working state of one reconcile: the status being rewritten, and the actions decided so far.

Why a small class: each step of the ladder in `plan.py` reads the job and the snapshot and adds
to the same decision; the epoch transitions (start, restart, fail, succeed) live here once, so
every step that needs one behaves the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, assert_never

from phalanx.models import labels
from phalanx.models.conditions import ConditionReason, ConditionType, EpochReason
from phalanx.models.events import EventReason, EventType, JobEvent
from phalanx.models.job import TrainingJob
from phalanx.models.spec import TrainingJobSpec
from phalanx.models.status import (
    Condition,
    EpochState,
    Failure,
    FailureClass,
    Phase,
    TrainingJobStatus,
)
from phalanx.operator.planner import inplace, memory, timeline
from phalanx.operator.planner.actions import (
    Action,
    DeletePods,
    EmitEvent,
    ObserveRecovery,
    PatchStatus,
    Plan,
)
from phalanx.operator.planner.classify import Verdict
from phalanx.operator.planner.observed import Observed

MAX_FAILURES = 10

RecoveredUntil = Literal["first-step", "pods-running"]


@dataclass
class Decision:
    """One reconcile in the making."""

    job: TrainingJob
    observed: Observed
    now: datetime
    status: TrainingJobStatus
    actions: list[Action] = field(default_factory=list)
    events: list[JobEvent] = field(default_factory=list)
    requeue_after: float | None = None
    creation_refused: bool = False
    """The API server refused one of the job's objects for this spec: create nothing more."""

    @property
    def spec(self) -> TrainingJobSpec:
        return self.job.spec

    @property
    def generation(self) -> int | None:
        return self.job.metadata.generation

    def requeue_at(self, when: datetime) -> None:
        """Look again at `when` (or earlier, if another step asks for earlier)."""
        self.requeue_in((when - self.now).total_seconds())

    def requeue_in(self, seconds: float) -> None:
        seconds = max(seconds, 0.05)
        self.requeue_after = (
            seconds if self.requeue_after is None else min(self.requeue_after, seconds)
        )

    def event(self, reason: EventReason, message: str, kind: EventType = "Normal") -> None:
        self.events.append(JobEvent(reason=reason, message=message, type=kind))

    def set_phase(self, phase: Phase) -> None:
        self.status.phase = phase

    def condition(self, kind: ConditionType) -> Condition | None:
        """The status's condition of type `kind`, if any."""
        return next((c for c in self.status.conditions if c.type == kind), None)

    def set_condition(
        self, kind: ConditionType, value: bool, reason: ConditionReason | str, message: str = ""
    ) -> None:
        """Set a condition; its transition time changes only when its status does. `reason` is
        the planner's own, or passed through: a failure's (Kubernetes' words among them), or
        the epoch's for Resizing (`EpochReason`)."""
        state: Literal["True", "False"] = "True" if value else "False"
        previous = next((c for c in self.status.conditions if c.type == kind), None)
        changed = previous is None or previous.status != state
        condition = Condition(
            type=kind,
            status=state,
            reason=reason,
            message=message,
            last_transition_time=self.now
            if changed or previous is None
            else previous.last_transition_time,
            observed_generation=self.generation,
        )
        others = [c for c in self.status.conditions if c.type != kind]
        self.status.conditions = [*others, condition]

    def clear_condition(self, kind: ConditionType, reason: ConditionReason) -> None:
        """Set a condition False if it is present and True."""
        if any(c.type == kind and c.status == "True" for c in self.status.conditions):
            self.set_condition(kind, False, reason)

    def delete_pods(self, names: list[str], force: bool = False) -> None:
        if names:
            gone = set(names)
            reported = sorted(p.name for p in self.observed.pods if p.name in gone and p.agent)
            self.actions.append(DeletePods(tuple(sorted(names)), force, tuple(reported)))

    @property
    def agent_allowed(self) -> bool:
        """Whether new node pods may get the injected agent: not once it could not run in the
        job's image (the AgentInjected condition is False)."""
        injected = self.condition(ConditionType.AGENT_INJECTED)
        return injected is None or injected.status != "False"

    @property
    def snapshot_bytes(self) -> int:
        """Host memory each pod's memory snapshots hold, for the pods and Workloads it asks for
        (`memory.snapshot_request`)."""
        return memory.snapshot_request(self.spec)

    def start_epoch(
        self, nodes: int, reason: EpochReason, exclude: frozenset[str] = frozenset()
    ) -> None:
        """Move to a new epoch of `nodes` node pods. Pods whose agent answers carry over (in-place
        restart; see `inplace`), except those in `exclude` (found silent); the others are
        retired before the epoch launches, so a silent pod never rejoins."""
        ranks, spares = inplace.carried_over(
            self.observed, self.status.epoch, nodes, frozenset(self.status.avoid_nodes), exclude
        )
        self.status.epoch += 1
        self.status.nodes = nodes
        self.status.world_size = nodes * self.spec.nproc_per_node
        self.status.current = EpochState(
            start_time=self.now,
            reason=reason,
            ranks=ranks,
            standbys={name: index for index, name in enumerate(spares)},
        )
        what = f"epoch {self.status.epoch} with {nodes} nodes"
        match reason:
            case EpochReason.CREATED | EpochReason.RESUMED:
                self.set_phase("Pending")
            case EpochReason.RESTART:
                self.set_phase("Restarting")
                self.set_condition(ConditionType.RESTARTING, True, reason, what)
            case EpochReason.SHRINK | EpochReason.GROW | EpochReason.SCALE | EpochReason.DRAIN:
                self.set_phase("Restarting")
                self.set_condition(ConditionType.RESIZING, True, reason, what)
            case _:
                assert_never(reason)
        keep = {*ranks, *spares, *exclude}  # the caller deletes those, by force
        retired = [p for p in self.observed.pods if not p.deleting and p.name not in keep]
        lost = [p.name for p in retired if self.observed.on_lost_node(p)]
        self.delete_pods([p.name for p in retired if p.name not in lost])
        self.delete_pods(lost, force=True)  # as `retire_previous_epoch` would, a reconcile later

    def record_failure(self, verdict: Verdict) -> None:
        """Remember a failure in status (the last few only)."""
        failure = Failure.model_validate(
            {
                "epoch": self.status.epoch,
                "class": verdict.failure_class,
                "reason": verdict.reason,
                "pod": verdict.pod,
                "node": verdict.node,
                "exitCode": verdict.exit_code,
                "message": (verdict.message or "")[:4096] or None,
                "time": self.now,
            }
        )
        self.status.failures = [*self.status.failures, failure][-MAX_FAILURES:]

    def count_restart(self, failure_class: FailureClass) -> None:
        restarts = self.status.restarts
        if failure_class == "application":
            restarts.application += 1
        else:
            restarts.infrastructure += 1
        restarts.total = restarts.application + restarts.infrastructure

    @property
    def progress_unreported(self) -> bool:
        """The program is known to report no steps (the ProgressReported condition is False)."""
        condition = self.condition(ConditionType.PROGRESS_REPORTED)
        return condition is not None and condition.status == "False"

    def lose_work_since_checkpoint(self) -> None:
        """Add the work since the last checkpoint (lost on restart) to lost time; none before
        a first step was reported (no step's work to lose, or, for a program that reports no
        steps, none known: a figure would be made up)."""
        running = self.status.current.running_time
        if running is None or self.status.progress is None:
            return
        saved = self.status.last_checkpoint.time if self.status.last_checkpoint else None
        since = max(running, saved) if saved else running
        self.status.lost_seconds += max((self.now - since).total_seconds(), 0.0)

    def clear_recovery_conditions(self) -> None:
        """End the Restarting and Resizing conditions: the new epoch runs."""
        self.clear_condition(ConditionType.RESTARTING, ConditionReason.RECOVERED)
        self.clear_condition(ConditionType.RESIZING, ConditionReason.RESIZED)

    def finish_recovery(
        self, step_before: int | None = None, until: RecoveredUntil = "first-step"
    ) -> None:
        """The new epoch trains (its first step): observe the recovery time, where it went and
        what it resumed from, count it as lost, and end the Restarting / Resizing conditions.
        `step_before`: the last step seen before the recovery (for the steps redone).
        `until="pods-running"`: the program reports no steps, so the recovery is measured to
        the moment the new epoch's pods all ran, and said to be."""
        self.clear_recovery_conditions()
        since = self.status.recovering_since
        if since is None:
            return
        failure_class: str = (
            self.status.failures[-1].failure_class if self.status.failures else "none"
        )
        if self.status.current.reason == EpochReason.DRAIN:
            failure_class = "planned"  # no failure: a node the cluster took away
        end = self.now
        if until == "pods-running":
            end = self.status.current.running_time or self.now
        beat = self.observed.heartbeat
        fresh = until == "first-step" and beat is not None and beat.epoch == self.status.epoch
        startup = beat.startup if beat is not None and fresh else None
        resumed = beat.resumed if beat is not None and fresh else None
        failed_at = self.status.failed_at
        seconds = max((end - (failed_at or since)).total_seconds(), 0.0)
        parts = timeline.parts(failed_at, since, startup, end)
        redone = None
        if resumed is not None and step_before is not None:
            redone = max(step_before - (resumed.step or 0), 0)
        self.actions.append(
            ObserveRecovery(
                seconds, failure_class, parts, resumed, redone, self.status.epoch, until
            )
        )
        if until == "pods-running":
            message = (
                f"epoch {self.status.epoch} runs again: its pods ran {seconds:.2f} s after the "
                "failure (the program reports no steps: its first step is not seen)"
            )
        else:
            message = (
                f"epoch {self.status.epoch} trains again {timeline.describe(seconds, parts)}"
                + (f"; {timeline.describe_resume(resumed, redone)}" if resumed is not None else "")
            )
        self.event(EventReason.RECOVERED, message)
        self.status.lost_seconds += seconds
        self.status.recovering_since = None
        self.status.failed_at = None

    def active_seconds(self) -> float:
        """How long the job has run, suspensions left out: its goodput's wall time."""
        if self.status.start_time is None or self.status.phase == "Suspended":
            return self.status.active_seconds
        return self.status.active_seconds + (self.now - self.status.start_time).total_seconds()

    def update_goodput(self) -> None:
        """1 - lost / wall time; None for a program that reports no steps (its lost work is not
        known, and a figure would be made up)."""
        if self.progress_unreported:
            self.status.goodput = None
            return
        wall = self.active_seconds()
        if wall > 0:
            self.status.goodput = round(
                min(max(1.0 - self.status.lost_seconds / wall, 0.0), 1.0), 4
            )

    def to_plan(self, previous: TrainingJobStatus | None) -> Plan:
        """The actions, with the status write first and the events after it."""
        self.status.observed_generation = self.generation
        self.status.selector = labels.job_selector(self.job.metadata.name or "")
        writes: list[Action] = []
        if previous is None or self.status != previous:
            self.update_goodput()
            writes.append(PatchStatus(self.status))
        return Plan(
            actions=[*writes, *self.actions, *map(EmitEvent, self.events)],
            requeue_after=self.requeue_after,
        )
