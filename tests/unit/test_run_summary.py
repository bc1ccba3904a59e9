"""What `phalanx run --output json` prints: the status' own fields under their wire names, none
of the planner's bookkeeping, and the run's events as they happened (one `JobEvent` shape).

Covers: the summary's keys; `lostSeconds` left out when the program reports no steps; the local
executor stamping each planned event with the moment it applied the plan.
"""

from __future__ import annotations

from pathlib import Path

from phalanx.local.cluster import LocalCluster
from phalanx.local.executor import LocalExecutor
from phalanx.local.launch import Workdir
from phalanx.local.summary import RunSummary
from phalanx.models.events import EventReason, JobEvent
from phalanx.models.status import EpochState, TrainingJobStatus
from phalanx.operator.planner import EmitEvent, Plan
from tests.unit.planner.builders import T0, job

RUN_KEYS = {"job", "recoveries", "recoveryParts", "resumes", "durationSeconds", "faults",
            "events", "workdir"}  # fmt: skip
STATUS_KEYS = {"phase", "conditions", "epoch", "nodes", "worldSize", "spares", "restarts",
               "failures", "lostSeconds"}  # fmt: skip
"""The status fields with a value in `_summary` (progress, lastCheckpoint, goodput are None)."""


def _summary(lost: float | None) -> RunSummary:
    status = TrainingJobStatus(
        phase="Succeeded", epoch=2, selector="phalanx.dev/job=j", observed_generation=1,
        current=EpochState(reason="Restart"), consecutive_failures=1, avoid_nodes=["n1"],
        start_time=T0, completion_time=T0,
    )  # fmt: skip
    return RunSummary(
        **(dict(status) | {"lost_seconds": lost}), job="j", duration_seconds=1.0, workdir="/w",
        events=[JobEvent(reason=EventReason.STARTED, message="epoch 1").at(T0)],
    )  # fmt: skip


def test_the_summary_has_the_status_fields_a_run_reports_and_not_the_bookkeeping() -> None:
    dumped = _summary(1.5).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert set(dumped) == STATUS_KEYS | RUN_KEYS
    assert dumped["epoch"] == 2
    assert dumped["lostSeconds"] == 1.5
    [event] = dumped["events"]
    assert event == {"reason": "Started", "message": "epoch 1", "type": "Normal",
                     "time": "2026-01-01T00:00:00Z"}  # fmt: skip


def test_lost_seconds_not_measured_is_left_out() -> None:
    dumped = _summary(None).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert set(dumped) == (STATUS_KEYS - {"lostSeconds"}) | RUN_KEYS


def test_the_local_executor_records_planned_events_when_it_applies_them(tmp_path: Path) -> None:
    seen: list[JobEvent] = []
    executor = LocalExecutor(job(), LocalCluster(), Workdir(tmp_path), "run", 0.5, seen.append)
    planned = JobEvent(reason=EventReason.HANG, message="no progress", type="Warning")
    executor.apply(Plan(actions=[EmitEvent(planned)]), T0)
    assert executor.events == seen == [planned.at(T0)]
    assert planned.time is None, "the plan's event is left as it was"
