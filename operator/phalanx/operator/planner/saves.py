"""Checkpoint saves that fail while training goes on: the `CheckpointFailing` condition.

Why its own condition, not a failure: a full checkpoint volume or a lost mount is not fixed by
a restart, and each restart would redo work. The program (the reference trainer, any script on
`phalanx.resume`) keeps training and resumable from its last committed checkpoint and its memory
snapshots, and reports the failed save in its heartbeat; the status says so, with the program's
own error and the checkpoint a restart would resume from, and a Warning event per failed step
tells whoever watches. The condition turns False when a save commits again.
"""

from __future__ import annotations

from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.events import EventReason
from phalanx.models.heartbeat import Heartbeat
from phalanx.models.status import Condition
from phalanx.operator.planner.decision import Decision

CONDITION = ConditionType.CHECKPOINT_FAILING


def track_saves(d: Decision, beat: Heartbeat) -> None:
    """Set or clear CheckpointFailing from the current epoch's heartbeat."""
    failure, current = beat.checkpoint_error, d.condition(CONDITION)
    last = d.status.last_checkpoint
    if failure is not None:
        resumable = f"step {last.step} ({last.path})" if last is not None else "none yet"
        what = f"step {failure.step}" if failure.step is not None else "a checkpoint"
        message = (f"saving {what} failed: {failure.message}; training goes on, the checkpoint "
                   f"a restart would resume from: {resumable} (and memory snapshots)")  # fmt: skip
        if current is None or current.status != "True" or current.message != message:
            d.event(EventReason.CHECKPOINT_FAILED, message, "Warning")
        d.set_condition(CONDITION, True, ConditionReason.SAVE_FAILED, message)
    elif current is not None and current.status == "True" and _committed_since(beat, current):
        assert beat.checkpoint is not None
        d.set_condition(CONDITION, False, ConditionReason.SAVE_COMMITTED,
                        f"step {beat.checkpoint.step} committed")  # fmt: skip


def _committed_since(beat: Heartbeat, condition: Condition) -> bool:
    """The heartbeat names a checkpoint committed after the condition turned True (a new
    epoch's heartbeat names none until it commits one: no failure reported yet is no proof)."""
    committed = beat.checkpoint
    if committed is None:
        return False
    since = condition.last_transition_time
    return committed.time is None or since is None or committed.time > since
