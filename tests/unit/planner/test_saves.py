"""CheckpointFailing: a failed save the program reported, while training goes on; one Warning
event per failed step; cleared by a checkpoint committed after it, not by a new epoch's
heartbeat that has not saved yet."""

from __future__ import annotations

from typing import Any

from phalanx.models import TrainingJob
from phalanx.operator.planner import Observed, Plan
from tests.unit.planner.builders import at, beat, launched, pods, step

ERROR = "[Errno 28] No space left on device"


def failing(step_: int) -> dict[str, Any]:
    return {"checkpoint_error": {"step": step_, "message": ERROR}}


def committed(step_: int, seconds: float) -> dict[str, Any]:
    return {"checkpoint": {"step": step_, "path": f"/ckpt/step-{step_}", "time": at(seconds)}}


def condition(j: TrainingJob) -> tuple[str, str, str] | None:
    assert j.status is not None
    found = next((c for c in j.status.conditions if c.type == "CheckpointFailing"), None)
    return (found.status, found.reason, found.message) if found else None


def warnings(plan: Plan) -> list[str]:
    return [e.message for e in plan.events if e.reason == "CheckpointFailed"]


def test_a_failed_save_is_a_condition_and_one_event_per_step_and_no_restart() -> None:
    j = launched()
    running = tuple(pods(1, 4))
    j, _ = step(j, Observed(pods=running, heartbeat=beat(1, 10, **committed(10, 11))), at(12))
    assert condition(j) is None, "absent while no save failed"
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 20, **committed(10, 11),
                                                                 **failing(20))), at(22))  # fmt: skip
    status, reason, message = condition(j) or ("", "", "")
    assert (status, reason) == ("True", "SaveFailed")
    assert "saving step 20 failed" in message
    assert ERROR in message
    assert "resume from: step 10 (/ckpt/step-10)" in message
    assert len(warnings(plan)) == 1
    assert j.status is not None
    assert j.status.epoch == 1, "no restart: training goes on"
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 21, **committed(10, 11),
                                                                 **failing(20))), at(23))  # fmt: skip
    assert warnings(plan) == [], "one event per failed step"
    j, plan = step(j, Observed(pods=running, heartbeat=beat(1, 30, **committed(10, 11),
                                                                 **failing(30))), at(32))  # fmt: skip
    assert len(warnings(plan)) == 1, "the next failed step is told too"
    j, _ = step(j, Observed(pods=running, heartbeat=beat(1, 40, **committed(40, 41))), at(42))
    assert condition(j) == ("False", "SaveCommitted", "step 40 committed")


def test_a_heartbeat_without_a_commit_since_does_not_clear_it() -> None:
    j = launched()
    running = tuple(pods(1, 4))
    j, _ = step(j, Observed(pods=running, heartbeat=beat(1, 20, **committed(10, 11),
                                                              **failing(20))), at(22))  # fmt: skip
    j, _ = step(j, Observed(pods=running, heartbeat=beat(1, 25, **committed(10, 11))), at(26))
    assert (condition(j) or ("",))[0] == "True", "step 10 was committed before the failure"
