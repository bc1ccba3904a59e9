"""A program that reports no steps (a script without phalanx.progress, under the agent or
started without it): status says so instead of made-up figures. No step, no goodput, no lost work
counted; a recovery is measured to the new epoch's pods running and labelled so. A program whose
agents report start-up phases (the reference trainer) is never judged so, and one that reports a
step later (a slow first step) is judged by its steps from then on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phalanx.models.assignment import AgentReport
from phalanx.models.job import TrainingJob
from phalanx.models.status import Condition, TrainingJobStatus
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import NodeView, Observed, ObserveRecovery, PodView
from phalanx.operator.planner.config import PlannerConfig
from tests.unit.planner.builders import T0, at, beat, job, pods, step

STEP_WAIT_SECONDS = PlannerConfig().step_wait_seconds


def st(j: TrainingJob) -> TrainingJobStatus:
    assert j.status is not None
    return j.status


def reported(j: TrainingJob) -> Condition | None:
    return next((c for c in st(j).conditions if c.type == "ProgressReported"), None)


def with_agents(epoch: int, n: int, phase: str) -> list[PodView]:
    """`n` running node pods of `epoch` whose agents run it in `phase`."""
    return [
        replace(p, agent=AgentReport.model_validate(
            {"pod": p.name, "state": "running", "epoch": epoch, "time": T0, "phase": phase}))
        for p in pods(epoch, n)
    ]  # fmt: skip


def restarted(view: Any = pods) -> TrainingJob:
    """Epoch 1 of 4 pods runs from t=10 (`view(epoch, n)` builds them); its node 3 is lost at
    t=20; epoch 2's 3 pods run from t=22. With agents the survivors carry over and the epoch
    launches at once; they still run at t=21. Without, they are stopped and gone at t=21."""
    j, _ = step(job(), Observed(), at(0))
    j, _ = step(j, Observed(pods=tuple(view(1, 4))), at(10))
    lost = {"node-3": NodeView("node-3", ready=False)}
    j, _ = step(j, Observed(pods=tuple(view(1, 4)), nodes=lost), at(20))
    assert (st(j).epoch, st(j).nodes) == (2, 3)
    survivors = () if view is pods else tuple(view(1, 3))
    j, _ = step(j, Observed(pods=survivors), at(21))
    j, plan = step(j, Observed(pods=tuple(view(2, 3))), at(22))
    assert not plan.of_type(ObserveRecovery)
    return j


def test_without_agents_the_recovery_ends_when_the_new_pods_ran_and_says_so() -> None:
    j = restarted()
    running = tuple(pods(2, 3))
    j, plan = step(j, Observed(pods=running), at(22 + STEP_WAIT_SECONDS - 1))
    assert not plan.of_type(ObserveRecovery), "an agent or a step may still show up"
    assert reported(j) is None
    assert plan.requeue_after is not None
    j, plan = step(j, Observed(pods=running), at(22 + STEP_WAIT_SECONDS))
    [recovery] = plan.of_type(ObserveRecovery)
    assert (recovery.seconds, recovery.until, recovery.parts) == (2, "pods-running", ())
    assert recovery.resumed is None
    [message] = [e.message for e in plan.events if e.reason == "Recovered"]
    assert "its pods ran 2.00 s after the failure" in message
    assert "reports no steps" in message
    condition = reported(j)
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "NoStepsReported")
    assert "phalanx.progress" in condition.message
    assert "hang detection: only a worker stopped for 10 s" in condition.message
    status = st(j)
    assert status.progress is None
    assert status.goodput is None, "not 1 - lost / wall with the lost work unknown"
    assert status.lost_seconds == 2, "the recovery measured; no step, so no work lost"
    assert status.recovering_since is None
    assert not any(c.type == "Restarting" and c.status == "True" for c in status.conditions)


def test_agents_that_run_it_untracked_say_the_same() -> None:
    j = restarted(lambda epoch, n: with_agents(epoch, n, "untracked"))
    running = tuple(with_agents(2, 3, "untracked"))
    j, plan = step(j, Observed(pods=running), at(22 + STEP_WAIT_SECONDS))
    [recovery] = plan.of_type(ObserveRecovery)
    assert recovery.until == "pods-running"
    assert st(j).goodput is None


def test_agents_that_report_start_up_phases_wait_for_the_first_step() -> None:
    """The reference trainer: however long its start, the recovery ends at its first step."""
    j = restarted(lambda epoch, n: with_agents(epoch, n, "training"))
    j, plan = step(j, Observed(pods=tuple(with_agents(2, 3, "loading"))), at(100))
    assert not plan.of_type(ObserveRecovery)
    assert reported(j) is None
    j, plan = step(
        j, Observed(pods=tuple(with_agents(2, 3, "training")), heartbeat=beat(2, 1)), at(101)
    )
    [recovery] = plan.of_type(ObserveRecovery)
    assert (recovery.seconds, recovery.until) == (81, "first-step")
    condition = reported(j)
    assert condition is not None
    assert condition.status == "True"
    assert st(j).goodput is not None


def test_a_job_that_succeeds_without_a_step_ends_its_recovery_when_its_pods_ran() -> None:
    j = restarted()
    done = tuple(replace(p, phase="Succeeded", exit_code=0) for p in pods(2, 3))
    j, plan = step(j, Observed(pods=done), at(25))
    assert st(j).phase == "Succeeded"
    [recovery] = plan.of_type(ObserveRecovery)
    assert (recovery.seconds, recovery.until) == (2, "pods-running"), "not 5 s: to the end"
    condition = reported(j)
    assert condition is not None
    assert condition.status == "False"
    assert st(j).goodput is None


def test_a_step_reported_late_makes_it_a_reporting_program() -> None:
    """A script whose first report comes after the wait (slow imports, data loading)."""
    j, _ = step(job(), Observed(), at(0))
    running = tuple(pods(1, 4))
    j, _ = step(j, Observed(pods=running), at(10))
    j, _ = step(j, Observed(pods=running), at(10 + STEP_WAIT_SECONDS))
    assert st(j).goodput is None
    j, _ = step(j, Observed(pods=running, heartbeat=beat(1, 1)), at(40))
    condition = reported(j)
    assert condition is not None
    assert condition.status == "True"
    assert st(j).progress is not None
    assert st(j).goodput == 1.0


def test_metrics_show_no_goodput_and_say_why() -> None:
    metrics = OperatorMetrics()
    j = restarted()
    before = st(j)
    j, _ = step(j, Observed(pods=tuple(pods(2, 3))), at(22 + STEP_WAIT_SECONDS))
    metrics.job_status("ns", "j", None, before.model_copy(update={"goodput": 0.5}))
    metrics.job_status("ns", "j", before, st(j))
    labels = {"namespace": "ns", "job": "j"}
    assert metrics.registry.get_sample_value("phalanx_goodput_ratio", labels) is None
    assert metrics.registry.get_sample_value("phalanx_progress_reported", labels) == 0
    assert (
        metrics.registry.get_sample_value(
            "phalanx_recovery_seconds_count", {"class": "infrastructure"}
        )
        is None
    )
