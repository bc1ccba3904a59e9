"""Small builders for planner tests: a job, its pods in given states, a heartbeat."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from harness.jobs import job_model
from phalanx.models import TrainingJob
from phalanx.models.heartbeat import Heartbeat
from phalanx.operator.planner import Observed, PodView, plan
from phalanx.operator.planner.actions import PatchStatus, Plan
from phalanx.operator.planner.config import PlannerConfig

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(**spec: Any) -> TrainingJob:
    """A TrainingJob (`job_model`) with nprocPerNode 2 and a 5 s backoff unless overridden."""
    backoff = {"initialSeconds": 5, "maxSeconds": 40}
    spec = {"nprocPerNode": 2, "failurePolicy": {"backoff": backoff}, **spec}
    return job_model(metadata={"generation": 1}, **spec)


def pods(epoch: int, n: int, phase: str = "Running", **overrides: Any) -> list[PodView]:
    """`n` node pods of `epoch`, all in `phase` and scheduled on node-<rank>."""
    fields: dict[str, Any] = {"phase": phase, "created": T0, **overrides}
    return [
        PodView(name=f"j-{epoch}-{r}", epoch=epoch, rank=r, node_name=f"node-{r}", **fields)
        for r in range(n)
    ]


def step(
    j: TrainingJob, observed: Observed, now: datetime, config: PlannerConfig | None = None
) -> tuple[TrainingJob, Plan]:
    """Run the planner and apply its status write to the job, as the API server would."""
    result = plan(j, observed, now, config)
    writes = result.of_type(PatchStatus)
    if writes:
        j = j.model_copy(update={"status": writes[0].status})
    return j, result


def beat(epoch: int, step_: int, **kw: Any) -> Heartbeat:
    return Heartbeat(epoch=epoch, step=step_, **kw)


def launched(j: TrainingJob | None = None, n: int = 4) -> TrainingJob:
    """A job whose epoch 1 of `n` pods was created and is running since t=10."""
    j = j or job()
    j, _ = step(j, Observed(), at(0))
    j, _ = step(j, Observed(pods=tuple(pods(1, n))), at(10))
    assert j.status
    assert j.status.current.launched
    assert j.status.phase == "Running"
    return j


def events(result: Plan) -> list[str]:
    """The reasons of a plan's events, in order."""
    return [e.reason for e in result.events]
