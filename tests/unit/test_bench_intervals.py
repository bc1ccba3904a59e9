"""The goodput benchmark's arithmetic on a made-up run whose answers are known by hand.

Covers: goodput = kept steps x median step / window (a redone step counts once); the save share
is the time steps took beyond the median, net; a recovery is the kill to the first step after
the pause; steps logged after the window are left out; the bound takes the run's own failure
interval; the time above the median is split by what the step before saved (the report's
"where the runs without failures lost time").
"""

from __future__ import annotations

import pytest

from bench.recovery.intervals import (
    Run,
    _window,
    _window_for,
    bound,
    derived,
    lost_per_failure,
    step_kind,
    time_above_median,
)


def steps(*spans: tuple[float, int, int]) -> list[dict[str, float | int]]:
    """(start time, first step, count) spans of steps 0.1 s apart."""
    return [{"time": round(t + i * 0.1, 3), "step": s + i, "world": 4}
            for t, s, n in spans for i in range(n)]  # fmt: skip


def test_goodput_counts_kept_steps_at_the_median_step_time() -> None:
    # steps 1..50 from t=0, a kill at 5.0, steps 46..95 again from 7.0 (5 redone), end at 12.0
    run = _window("x", 10.0, steps((0.0, 1, 50), (7.0, 46, 50)), 12.0, [5.0])
    assert run.step_time == pytest.approx(0.1)
    assert run.kept == 95
    assert run.window == pytest.approx(12.0)
    assert run.goodput == pytest.approx(95 * 0.1 / 12.0)
    assert run.recoveries == [pytest.approx(2.0)]  # 5.0 -> 7.0
    terms = {"save_share": 0.0, "tau": 1.0, "recovery": 2.0}
    assert bound(terms, run.figures()) == pytest.approx(1 - (2.0 + 0.5) / 12.0)


def test_slow_steps_are_the_save_share_and_late_steps_are_left_out() -> None:
    records = steps((0.0, 1, 10), (1.4, 11, 10))  # one step 0.5 s late (a sync save)
    run = _window("x", None, records, 2.3, [])
    assert run.save_share == pytest.approx(0.4 / 2.3, abs=1e-3)
    assert _window("x", None, records, 1.0, []).kept == 10  # steps after the end: not in it
    assert (
        bound({"save_share": 0.1, "tau": 1.0, "recovery": 1.0}, Run("x", None, 1.0).figures())
        == 0.9
    )


def _run(system: str, interval: float | None, goodput_steps: int, kills: int, repeat: int,
         window: float = 10.0) -> Run:  # fmt: skip
    """A run whose goodput is `goodput_steps` x 0.1 s / `window`."""
    run = _window(system, interval, steps((0.0, 1, goodput_steps)), window, [1.0] * kills)
    run.repeat = repeat
    return run


def test_a_derived_interval_is_each_repeats_g0_less_the_measured_cost_of_a_failure() -> None:
    # repeat 0: G0 0.9; 2 kills in 10 s leave 0.7: each cost (0.9 - 0.7) x 10 / 2 = 1 s
    # repeat 1: G0 0.8; 1 kill in 10 s leaves 0.7: it cost 1 s too
    runs = [_run("phalanx", None, 90, 0, 0), _run("phalanx", 30.0, 70, 2, 0),
            _run("phalanx", None, 80, 0, 1), _run("phalanx", 30.0, 70, 1, 1)]  # fmt: skip
    assert lost_per_failure(runs, "phalanx", 0) == pytest.approx(1.0)
    assert lost_per_failure(runs, "phalanx", 1) == pytest.approx(1.0)
    figures = derived(runs, [600.0])["phalanx"]
    assert figures["goodput"]["600"] == [pytest.approx(0.9 - 1 / 600), pytest.approx(0.8 - 1 / 600)]
    assert derived(runs, [600.0])["torchrun"]["goodput"]["600"] == [], "no runs, no figure"


def test_node_losses_are_not_counted_as_worker_kills() -> None:
    node = _run("phalanx", 30.0, 10, 2, 0)
    node.failure = "node"
    runs = [_run("phalanx", None, 90, 0, 0), node]
    assert lost_per_failure(runs, "phalanx", 0) is None


def test_a_window_holds_whole_intervals() -> None:
    assert [_window_for(90, m) for m in (30, 60, 600)] == [90, 120, 600]


def test_time_above_the_median_is_split_by_what_the_step_before_saved() -> None:
    # steps 1..60, 0.1 s apart, except: the step after each save of step 20 or 40 takes 0.5 s
    # more (the first 0.9 s more), the step after a snapshot (10, 30, 50) 0.05 s more
    times, t = [], 0.0
    for step in range(1, 61):
        extra = {21: 0.9, 41: 0.5, 11: 0.05, 31: 0.05, 51: 0.05}.get(step, 0.0)
        t += 0.1 + extra
        times.append({"time": round(t, 3), "step": step})
    parts = time_above_median(times, 0.1, checkpoint_every=20, snapshot_every=10)
    assert parts == {
        "the first after a checkpoint": pytest.approx(0.9),
        "after a checkpoint": pytest.approx(0.5),
        "the first after a snapshot": pytest.approx(0.05),
        "after a snapshot": pytest.approx(0.1),
        "the others": pytest.approx(0.0, abs=1e-9),
    }
    assert step_kind(21, 20, 0, set()) == "the first after a checkpoint", "snapshots off"
    assert step_kind(11, 20, 0, set()) == "the others"
