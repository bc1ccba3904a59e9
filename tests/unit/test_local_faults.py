"""Parsing the local backend's fault and capacity flags, and when they fall due."""

from __future__ import annotations

import pytest

from phalanx.local.faults import (
    CapacityChange,
    Fault,
    FaultPlan,
    parse_capacity_schedule,
    parse_duration,
    parse_kill_rank,
    parse_trigger,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20s", 20), ("1m30s", 90), ("500ms", 0.5), ("1.5h", 5400), ("7", 7), ("0.25", 0.25)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "20x", "s20", "1m 30s", "-3"])
def test_bad_durations_say_what_a_duration_looks_like(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|negative"):
        parse_duration(text)


def test_capacity_schedule() -> None:
    assert parse_capacity_schedule("30s=4, 1m30s=2") == [
        CapacityChange(30, 4),
        CapacityChange(90, 2),
    ]
    for bad in ("30s", "30s=four", "=4"):
        with pytest.raises(ValueError, match=r"WHEN=NODES|not a time"):
            parse_capacity_schedule(bad)


def test_kill_rank() -> None:
    assert parse_kill_rank("3", default_at=20) == Fault("kill-rank", 20, rank=3)
    assert parse_kill_rank("1@45s", default_at=20) == Fault("kill-rank", 45, rank=1)
    with pytest.raises(ValueError, match="RANK@WHEN"):
        parse_kill_rank("one@2s", default_at=20)


def test_each_fault_and_change_is_due_once() -> None:
    plan = FaultPlan(
        faults=[Fault("kill-node", 20), Fault("hang-node", 10)],
        capacity=[CapacityChange(30, 4)],
    )
    assert plan.due_faults(5) == []
    assert [f.kind for f in plan.due_faults(25)] == ["hang-node", "kill-node"]
    assert plan.due_faults(100) == []
    assert plan.due_capacity(29.9) == []
    assert plan.due_capacity(30) == [CapacityChange(30, 4)]
    assert plan.due_capacity(31) == []


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("20s", {"at": 20.0}),
        ("step:60", {"step": 60}),
        ("checkpoint", {"after_checkpoint": True}),
        ("loading", {"phase": "loading"}),
        ("first-step", {"phase": "first-step"}),
    ],
)
def test_a_fault_strikes_at_a_time_a_step_a_checkpoint_or_a_phase(
    text: str, fields: dict[str, object]
) -> None:
    assert parse_trigger(text) == fields


@pytest.mark.parametrize("text", ["step:", "step:x", "soon", "training"])
def test_a_bad_trigger_says_what_one_looks_like(text: str) -> None:
    with pytest.raises(ValueError, match=r"step:N|not a time"):
        parse_trigger(text)


def test_faults_by_progress_are_due_when_training_got_there_whatever_the_clock() -> None:
    at_step = Fault("kill-node", step=60)
    after_checkpoint = Fault("hang-node", after_checkpoint=True)
    plan = FaultPlan(faults=[at_step, after_checkpoint], capacity=[CapacityChange(0, 5, step=90)])
    assert plan.due_faults(600, step=None) == [], "no step reported yet: not due, however late"
    assert plan.due_faults(600, step=59, checkpointed=False) == []
    assert plan.due_faults(5, step=60, checkpointed=False) == [at_step]
    assert plan.due_faults(5, step=61, checkpointed=True) == [after_checkpoint]
    assert plan.due_capacity(600, step=89) == []
    assert plan.due_capacity(1, step=90) == [CapacityChange(0, 5, step=90)]
    assert parse_capacity_schedule("step:90=5") == [CapacityChange(0, 5, step=90)]
    with pytest.raises(ValueError, match="a time or a step"):
        parse_capacity_schedule("loading=5")
    assert parse_kill_rank("1@step:40", default_at=20) == Fault("kill-rank", rank=1, step=40)
