"""The memory snapshot cadence keeps snapshots within spec.checkpoint.memoryOverheadPercent of
step time: every memoryIntervalSteps while they are cheap, every whole multiple of it when one
costs more (its own blocked time and what the step after it took beyond the others), not
counting a snapshot that touched its slot for the first time or stood for a checkpoint, and
exactly the interval when the budget is 0. The ranks' agreement on the steps is
`Resumable._agree`'s (run for real in tests/local/test_inplace.py); `Resumable` keeps this
cadence in tests/trainer/test_snapshot_budget.py."""

from __future__ import annotations

from phalanx.resume.cadence import SnapshotCadence


def steps(cadence: SnapshotCadence, seconds: float, count: int = 10) -> None:
    for _ in range(count):
        cadence.step_took(seconds)


def due_steps(cadence: SnapshotCadence, upto: int) -> list[int]:
    return [step for step in range(1, upto + 1) if cadence.due(step)]


def test_a_cheap_snapshot_keeps_the_interval() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=1)
    steps(cadence, 0.116)
    cadence.snapshot_took(0.003, counted=True)  # the toy alone: 3 ms of 116 ms steps
    cadence.step_took(0.116)
    assert due_steps(cadence, 40) == [10, 20, 30, 40]


def test_a_costly_snapshot_spaces_them_to_the_budget() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=1)
    steps(cadence, 0.842)
    cadence.snapshot_took(0.128, counted=True)  # 117.5 M: 128 ms of 842 ms steps
    cadence.step_took(0.842)  # settled by the step after it: 16 steps, so every 20
    assert due_steps(cadence, 60) == [20, 40, 60]
    assert 0.128 / (cadence.spacing * 0.842) <= 0.01


def test_what_the_step_after_it_lost_counts_too() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=1)
    steps(cadence, 0.151)
    cadence.snapshot_took(0.003, counted=True)  # 3 ms on this rank...
    cadence.step_took(0.164)  # ...and the next step waited 13 ms (a slower rank, a GPU copy)
    assert cadence.spacing == 20


def test_cheaper_snapshots_bring_the_interval_back() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=1)
    steps(cadence, 0.5)
    cadence.snapshot_took(0.2, counted=True)
    cadence.step_took(0.5)
    assert cadence.spacing == 40
    cadence.snapshot_took(0.01, counted=True)
    cadence.step_took(0.5)
    assert cadence.spacing == 10


def test_a_first_use_or_a_checkpoints_snapshot_does_not_count() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=1)
    steps(cadence, 0.842)
    cadence.snapshot_took(1.8, counted=False)  # pages touched for the first time
    cadence.step_took(3.0)  # and the step after a checkpoint's, beside its upload
    assert due_steps(cadence, 20) == [10, 20]


def test_no_budget_means_exactly_the_interval() -> None:
    cadence = SnapshotCadence(interval_steps=10, overhead_percent=0)
    steps(cadence, 0.1)
    cadence.snapshot_took(5.0, counted=True)
    cadence.step_took(0.1)
    assert due_steps(cadence, 30) == [10, 20, 30]


def test_no_interval_means_no_snapshot() -> None:
    assert due_steps(SnapshotCadence(interval_steps=0, overhead_percent=1), 50) == []
