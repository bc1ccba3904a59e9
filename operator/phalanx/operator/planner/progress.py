"""The running epoch's bookkeeping: phase, recovery time, progress and checkpoints from the
heartbeat."""

from __future__ import annotations

from phalanx.models.status import Progress
from phalanx.operator.planner import heartbeat
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision


def track_progress(d: Decision, _: PlannerConfig) -> bool:
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
            "Running", True, "AllRanksRunning", f"epoch {d.status.epoch}: {d.status.nodes} nodes"
        )
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
        )
        d.status.consecutive_failures = 0
        # training resumed: start-up and checkpoint load were part of the recovery
        d.finish_recovery(previous.step if previous is not None else None)
    if beat is not None and beat.checkpoint is not None:
        d.status.last_checkpoint = beat.checkpoint.model_copy()
    return False
