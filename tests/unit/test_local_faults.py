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
        with pytest.raises(ValueError, match=r"TIME=NODES|duration"):
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
