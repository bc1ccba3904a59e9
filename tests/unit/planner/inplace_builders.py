"""Builders for the in-place planner tests: agents' reports, pods whose agents answer, spares,
and a job running its first epoch with them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from phalanx.models.assignment import AgentReport
from phalanx.operator.planner import AssignEpoch, Observed, PodView
from phalanx.operator.planner.config import PlannerConfig
from tests.unit.planner.builders import T0, at, job, pods, step


def report(pod: str, state: str, epoch: int, **fields: Any) -> AgentReport:
    return AgentReport.model_validate(
        {"pod": pod, "state": state, "epoch": epoch, "time": T0, **fields}
    )


def agents(epoch: int, n: int, running_epoch: int | None = None) -> list[PodView]:
    """`n` node pods of `epoch` whose agents run epoch `running_epoch` (default: their own)."""
    serving = running_epoch or epoch
    return [replace(p, agent=report(p.name, "running", serving)) for p in pods(epoch, n)]


def spare(index: int, epoch: int = 1, node: str | None = None) -> PodView:
    name = f"j-standby-{epoch}-{index}"
    return PodView(
        name=name, epoch=epoch, rank=index, role="standby", phase="Running",
        node_name=node or f"spare-node-{index}", created=T0, agent=report(name, "standby", 0),
    )  # fmt: skip


def running(j=None, n: int = 4, extra: tuple[PodView, ...] = ()):  # type: ignore[no-untyped-def]
    """A job whose epoch 1 of `n` pods runs with in-place agents since t=10."""
    j = j or job()
    j, _ = step(j, Observed(), at(0))
    j, _ = step(j, Observed(pods=(*agents(1, n), *extra)), at(10))
    assert j.status is not None
    assert j.status.phase == "Running"
    return j


def failed_worker(p: PodView, code: int, message: str) -> PodView:
    return replace(p, agent=report(p.name, "failed", p.epoch, exitCode=code, message=message))


def restarted_by_a_collective_failure(config: PlannerConfig) -> tuple[Any, list[PodView]]:
    """Epoch 1 of 4 pods runs; at t=20 every worker failed in a collective, and the planner
    started epoch 2 with all 4 pods carried over. Returns the job and epoch 1's pods."""
    j = running()
    gang = [failed_worker(p, 75, "Gloo connection reset") for p in agents(1, 4)]
    j, _ = step(j, Observed(pods=tuple(gang)), at(20), config)
    return j, gang


def started_epoch_2(when: datetime, missing: int) -> list[PodView]:
    """Epoch 1's pods whose agents started epoch 2 at `when`, all but node rank `missing`."""
    return [
        replace(p, agent=report(p.name, "running", 2, time=when))
        for p in agents(1, 4)
        if p.rank != missing
    ]


def assigned(plan) -> dict[str, int]:  # type: ignore[no-untyped-def]
    [assignment] = plan.of_type(AssignEpoch)
    return dict(assignment.ranks)
