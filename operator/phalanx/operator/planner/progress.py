"""The running epoch's bookkeeping: phase, recovery time, progress and checkpoints from the
heartbeat; and, for a program that reports no steps, saying so.

Why "not reported" is a state of its own: a third-party script that does not use
`phalanx.progress` sends no heartbeat. Read as zero steps, its recovery would last until the job
ended and its goodput would be near 0, none of it true. Instead the `ProgressReported` condition
is False, goodput is None, the work lost to a failure is not counted, and a recovery is measured
to what can be seen: the new epoch's pods running (`until="pods-running"`, said in its event).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from phalanx.models import env
from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.status import Progress
from phalanx.operator.planner import heartbeat
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.saves import track_saves

NOT_REPORTED = "the program reports no steps (see phalanx.progress)"


def track_progress(d: Decision, config: PlannerConfig) -> bool:
    """Running bookkeeping: phase, recovery time, and progress from the heartbeat."""
    pods = d.observed.node_pods(d.status.epoch)
    running = len(pods) == d.status.nodes and all(p.phase == "Running" for p in pods.values())
    if not running:
        if d.status.phase != "Restarting":
            d.set_phase("Pending")
        return False
    d.set_phase("Running")
    if d.status.current.running_time is None:
        d.status.current.running_time = d.now
        d.set_condition(
            ConditionType.RUNNING, True, ConditionReason.ALL_RANKS_RUNNING,
            f"epoch {d.status.epoch}: {d.status.nodes} nodes",
        )  # fmt: skip
    beat = d.observed.heartbeat
    if beat is not None and heartbeat.advanced(d.status, beat):
        previous = d.status.progress
        if previous is None or previous.epoch != beat.epoch:
            started = d.status.current.running_time
            if started is not None:
                seconds = round(max((d.now - started).total_seconds(), 0.0), 3)
                d.status.startup_seconds = max(d.status.startup_seconds or 0.0, seconds)
        step_seconds = heartbeat.slowest_step_seconds(beat)
        if step_seconds is None and d.status.progress is not None:
            step_seconds = d.status.progress.step_seconds  # most heartbeats carry no window
        d.status.progress = Progress(
            epoch=beat.epoch,
            step=beat.step,
            data_epoch=beat.data_epoch,
            samples_per_second=beat.samples_per_second,
            loss=beat.loss,
            step_seconds=step_seconds,
            updated_at=d.now,
            total_steps=beat.total_steps,
            eta=eta(d.now, beat.step, beat.total_steps, step_seconds or beat.step_seconds),
        )
        d.status.consecutive_failures = 0
        timeout = heartbeat.hang_timeout(d.spec.failure_policy.hang_timeout_seconds, step_seconds)
        d.set_condition(
            ConditionType.PROGRESS_REPORTED, True, ConditionReason.STEPS_REPORTED,
            f"step {beat.step}; hang detection: a step that does not advance for {timeout.why}",
        )  # fmt: skip
        # training resumed: start-up and checkpoint load were part of the recovery
        d.finish_recovery(previous.step if previous is not None else None)
    elif d.status.progress is None:
        unreported(d, config)
    if beat is not None and beat.checkpoint is not None:
        d.status.record_checkpoint(beat.checkpoint)
    if beat is not None and beat.epoch == d.status.epoch:
        track_saves(d, beat)
    return False


def eta(
    now: datetime, step: int, total_steps: int | None, step_seconds: float | None
) -> datetime | None:
    """When `total_steps` is reached at `step_seconds` a step from `now`; None when either is
    unknown. Synchronous training runs at its slowest rank's pace, so that rank's step time is
    the one to use when known."""
    if total_steps is None or step_seconds is None:
        return None
    return now + timedelta(seconds=max(total_steps - step, 0) * step_seconds)


def unreported(d: Decision, config: PlannerConfig) -> None:
    """No step reported yet, the epoch's pods run: once it is known that the program reports
    none, say so, and end a recovery at the moment the pods ran (all that can be measured)."""
    if not reports_no_steps(d, config.step_wait_seconds):
        return
    say_unreported(d)
    if d.status.recovering_since is not None:
        d.finish_recovery(until="pods-running")


def say_unreported(d: Decision) -> None:
    """The ProgressReported condition is False: the program reports no steps, and so which hang
    detection it gets, with its timeout."""
    if not d.progress_unreported:
        stopped = d.spec.failure_policy.hang_timeout_seconds or env.STOPPED_WORKER_SECONDS
        d.set_condition(
            ConditionType.PROGRESS_REPORTED, False, ConditionReason.NO_STEPS_REPORTED,
            f"{NOT_REPORTED}; hang detection: only a worker stopped for {stopped:g} s, found by "
            "its agent where it runs under one, and torch's own collective timeout; no "
            "stragglers",
        )  # fmt: skip


def reports_no_steps(d: Decision, wait_seconds: float) -> bool:
    """Whether the running epoch's program is known to report no steps: it reported none yet,
    every agent of the epoch runs it `untracked` or there is none (a program started without
    `phalanx-agent`), and `wait_seconds` passed since its pods all ran (PlannerConfig's
    `step_wait_seconds`: a script under the agent is `untracked` until its workers call
    `phalanx.progress`, after their imports, and a program started without the agent is known
    only by its silence). An agent that
    reports a start-up phase runs a program that reports steps (the reference trainer; a script
    that calls `phalanx.progress.phase`); one that reports no phase at all (an agent older than
    phases) leaves it unknown."""
    epoch = d.status.epoch
    if any(
        p.agent is not None and p.agent.epoch == epoch and p.agent.phase != "untracked"
        for p in d.observed.node_pods(epoch).values()
    ):
        return False
    running = d.status.current.running_time
    if running is None:
        return False
    due = running + timedelta(seconds=wait_seconds)
    if d.now < due:
        d.requeue_at(due)
        return False
    return True


def ended_unreported(d: Decision) -> None:
    """The job succeeded without a step ever reported: its program reports none, for certain.
    A recovery still open ends at the moment the last epoch's pods ran, or, when they were never
    all seen running, is not measured at all."""
    say_unreported(d)
    if d.status.current.running_time is not None:
        d.finish_recovery(until="pods-running")
        return
    d.clear_recovery_conditions()
    d.status.recovering_since = None
    d.status.failed_at = None
