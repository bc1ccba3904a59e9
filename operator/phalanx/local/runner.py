"""`LocalRun`: one TrainingJob on this machine, driven by the operator's planner.

Each tick: apply due capacity changes and faults, reap and start processes, read the heartbeat
file, `plan(job, observed, now)`, and execute the plan. Ctrl-C is a suspend: the planner deletes
every pod, agents checkpoint on SIGTERM, and the next run resumes from there; a second Ctrl-C
kills at once. Whatever happens, no process of the run outlives it.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from phalanx.local import inject, processes
from phalanx.local.cluster import LocalCluster
from phalanx.local.executor import LocalExecutor
from phalanx.local.faults import FaultPlan
from phalanx.local.launch import Workdir, memory_root, sweep_memory_roots
from phalanx.local.summary import InjectedFault, RunSummary
from phalanx.models import env
from phalanx.models.conditions import ConditionType
from phalanx.models.events import EventReason, JobEvent
from phalanx.models.heartbeat import Heartbeat
from phalanx.models.job import TrainingJob
from phalanx.models.status import ENDED, CheckpointRef, Progress, TrainingJobStatus
from phalanx.operator.planner import PlannerConfig, plan
from phalanx.operator.planner.progress import NOT_REPORTED, eta

LOCAL_PLANNER = PlannerConfig(
    grow_cooldown_seconds=10.0, retire_poll_seconds=0.2, assignment_ack_seconds=3.0,
    step_wait_seconds=10.0,
)  # fmt: skip
"""The operator's knobs, scaled for one machine: grow back 10 s after an epoch starts running, an
agent that has not started its new epoch within 3 s (it polls every 50 ms) is frozen, and a
program with no step 10 s after its pods ran reports none."""


@dataclass
class RunOptions:
    """How to run a job locally (the `phalanx run` flags)."""

    workdir: Path
    capacity: int | None = None
    """Nodes the local cluster holds at the start; default: the job's desired size plus its hot
    spares (spec.spares)."""
    faults: FaultPlan = field(default_factory=FaultPlan)
    grace_seconds: float = 5.0
    """SIGTERM -> SIGKILL delay when a pod is deleted (a pod's terminationGracePeriodSeconds)."""
    tick_seconds: float = 0.2
    heartbeat_seconds: float = 0.5
    planner: PlannerConfig = LOCAL_PLANNER
    fresh: bool = False
    """Delete the work directory (and its checkpoints) first, instead of resuming from it."""


def _now() -> datetime:
    return datetime.now(UTC)


def _condition(status: TrainingJobStatus, kind: ConditionType) -> str | None:
    """The message of condition `kind` if it is True."""
    return next(
        (c.message or c.reason for c in status.conditions if c.type == kind and c.status == "True"),
        None,
    )


def _unreported(status: TrainingJobStatus) -> bool:
    """The program is known to report no steps (its ProgressReported condition is False)."""
    return any(
        c.type == ConditionType.PROGRESS_REPORTED and c.status == "False" for c in status.conditions
    )


class LocalRun:
    """One job on the local cluster, from start to Succeeded, Failed or Suspended."""

    def __init__(
        self,
        job: TrainingJob,
        options: RunOptions,
        on_event: Callable[[JobEvent], None] = lambda _: None,
    ) -> None:
        self.options = options
        self.workdir = Workdir(options.workdir)
        self.run_id = uuid.uuid4().hex
        self.cluster = LocalCluster(grace_seconds=options.grace_seconds)
        self.executor = LocalExecutor(
            job, self.cluster, self.workdir, self.run_id, options.heartbeat_seconds, on_event
        )
        self.faults: list[InjectedFault] = []
        self.fault_dir = self.workdir.root / "faults"
        self.armed = 0
        if any(f.phase is not None for f in options.faults.faults):
            self.executor.extra_env[env.PHALANX_FAULT_DIR] = str(self.fault_dir)
        self.stop_requests = 0
        self.warned_steps = False
        self.message: str | None = None
        self.started = time.monotonic()

    @property
    def job(self) -> TrainingJob:
        return self.executor.job

    @property
    def status(self) -> TrainingJobStatus:
        return self.job.status or TrainingJobStatus()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def request_stop(self) -> None:
        """Ctrl-C: the first suspends (checkpoint, then stop), the second kills."""
        self.stop_requests += 1

    def run(self, on_tick: Callable[[LocalRun], None] = lambda _: None) -> RunSummary:
        if self.options.fresh:
            shutil.rmtree(self.workdir.root, ignore_errors=True)
        self.workdir.root.mkdir(parents=True, exist_ok=True)
        sweep_memory_roots()  # what runs killed with SIGKILL left in /dev/shm
        self.workdir.heartbeat.unlink(missing_ok=True)
        shutil.rmtree(self.fault_dir, ignore_errors=True)  # an earlier run's armed faults
        self.started = time.monotonic()
        capacity = self.options.capacity
        default = self.job.spec.desired_nodes + self.job.spec.spares
        self.cluster.set_capacity(default if capacity is None else capacity)
        try:
            while not self._finished():
                requeue = self._tick()
                on_tick(self)
                time.sleep(min(self.options.tick_seconds, max(requeue, 0.02)))
        finally:
            self.cluster.shutdown()
            processes.sweep(self.run_id)
            shutil.rmtree(memory_root(self.run_id), ignore_errors=True)
        return self.summary()

    def _tick(self) -> float:
        self._apply_schedule()
        if self.stop_requests == 1 and not self.job.spec.suspend:
            spec = self.job.spec.model_copy(update={"suspend": True})
            self.executor.job = self.job.model_copy(update={"spec": spec})
            self.message = (
                "interrupted (Ctrl-C): pods stopped after checkpointing; run again to resume"
            )
        elif self.stop_requests >= 2:
            self.cluster.shutdown()
        self.cluster.tick()
        now = _now()
        decided = plan(
            self.job, self.cluster.observed(self._heartbeat()), now, self.options.planner
        )
        self.executor.apply(decided, now)
        self.cluster.tick()  # start what was just created
        return decided.requeue_after or self.options.tick_seconds

    def _apply_schedule(self) -> None:
        elapsed, schedule = self.elapsed, self.options.faults
        progress = self.status.progress
        step = progress.step if progress is not None else None
        for change in schedule.due_capacity(elapsed, step):
            lost = self.cluster.set_capacity(change.nodes)
            note = f"; lost {', '.join(lost)}" if lost else ""
            message = f"local cluster now holds {change.nodes} nodes{note}"
            self.executor.record(
                JobEvent(reason=EventReason.CAPACITY, message=message, time=_now())
            )
        for fault in schedule.due_faults(elapsed, step, self._checkpointed()):
            if fault.phase is not None:  # struck by the worker that enters the phase
                inject.arm(self.fault_dir, self.armed, fault)
                self.armed += 1
                continue
            record = inject.strike(self.cluster, self.job, fault, _now())
            if record is None:  # no running gang to hit yet
                schedule.faults.append(fault)
                continue
            self._struck(record)
        if self.armed:
            for record in inject.finish_struck(self.cluster, self.fault_dir):
                self._struck(record)
        self._warn_of_steps_never_seen()

    def _warn_of_steps_never_seen(self) -> None:
        """Once the program is known to report no steps, say (once) that what waits for
        `step:N` will not come unless it does, rather than letting a fault silently not strike."""
        waiting = [f"{f.kind} at step:{f.step}" for f in self.options.faults.faults if f.step]
        waiting += [f"capacity {c.nodes} at step:{c.step}" for c in self.options.faults.capacity
                    if c.step]  # fmt: skip
        if self.warned_steps or not waiting or not _unreported(self.status):
            return
        self.warned_steps = True
        message = (
            f"{', '.join(waiting)} waits for a step, but {NOT_REPORTED}: "
            "use a time (20s) or `checkpoint` instead"
        )
        self.executor.record(
            JobEvent(reason=EventReason.NO_STEPS, message=message, type="Warning", time=_now())
        )

    def _checkpointed(self) -> bool:
        """A checkpoint is committed: the program reported one (phalanx.progress), or one lies
        complete in the run's checkpoint directory (`step-N/.metadata`, as DCP writes it), which
        a script that reports nothing may use (PHALANX_CHECKPOINT_DIR)."""
        if self.status.last_checkpoint is not None:
            return True
        return self.workdir.checkpoints.is_dir() and self.workdir.newest_checkpoint() is not None

    def _struck(self, record: InjectedFault) -> None:
        self.faults.append(record)
        event = JobEvent(
            reason=EventReason.FAULT_INJECTED, message=inject.describe(record), type="Warning",
            time=record.time,
        )  # fmt: skip
        self.executor.record(event)

    def _heartbeat(self) -> Heartbeat | None:
        try:
            return Heartbeat.model_validate_json(self.workdir.heartbeat.read_bytes())
        except (FileNotFoundError, ValidationError):
            return None

    def _finished(self) -> bool:
        """Done when the job ended (or is stuck for good) and no process of it runs."""
        status, live = self.status, self.cluster.live_pods()
        if self.stop_requests >= 2:
            return True
        if status.phase in ENDED or (status.phase == "Suspended" and self.stop_requests):
            return not live
        stuck = _condition(status, ConditionType.CONFIGURATION_ERROR)
        if stuck is None and not self.options.faults.capacity:
            stuck = _condition(status, ConditionType.UNSCHEDULABLE)
        if stuck is not None:
            self.message = stuck  # nothing will change on its own: end the run (it cleans up)
            return True
        return False

    def summary(self) -> RunSummary:
        self._warn_of_steps_never_seen()  # known at the end at the latest
        status, message = self.status.model_copy(deep=True), self.message
        beat = self._heartbeat()  # the last one may come after the planner stopped reading
        if (
            beat is not None
            and beat.epoch == status.epoch
            and (status.progress is None or beat.step > status.progress.step)
        ):
            kept = status.progress
            step_seconds = kept.step_seconds if kept is not None else None
            status.progress = Progress(
                    epoch=beat.epoch, step=beat.step, data_epoch=beat.data_epoch,
                    samples_per_second=beat.samples_per_second, loss=beat.loss,
                    step_seconds=step_seconds, updated_at=kept.updated_at if kept else None,
                    total_steps=beat.total_steps,
                    eta=eta(datetime.now(UTC), beat.step, beat.total_steps,
                            step_seconds or beat.step_seconds),
                )  # fmt: skip
        reported = beat.checkpoint if beat is not None and beat.epoch == status.epoch else None
        newest = self.workdir.newest_checkpoint()
        found = CheckpointRef(step=newest[0], path=str(newest[1])) if newest else None
        for checkpoint in (reported, found):
            if checkpoint is not None:
                status.record_checkpoint(checkpoint)
        phase = status.phase
        if message and phase not in ("Succeeded", "Suspended"):
            phase = "Failed"  # stuck for good (see `_finished`)
        if phase == "Failed" and message is None:
            message = _condition(status, ConditionType.FAILED)
        lost = None if _unreported(status) else round(status.lost_seconds, 3)
        return RunSummary(
            **(dict(status) | {"phase": phase, "lost_seconds": lost}),
            job=self.job.metadata.name or "",
            message=message,
            recoveries=self.executor.recoveries,
            recovery_parts=self.executor.recovery_parts,
            resumes=self.executor.resumes,
            duration_seconds=round(self.elapsed, 3),
            faults=self.faults,
            events=self.executor.events,
            workdir=str(self.workdir.root),
        )
