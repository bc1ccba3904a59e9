"""The benchmark report's targets, checked on figures whose verdicts are known by hand.

Covers: a target is met at its limit and missed just past it (recovery p50 and p99, goodput at a
failure every 60 s, async vs sync blocking, in-memory share of step time, pods created, reconcile
p99, RSS in MB from MiB; a p99 past the histogram's last bucket reads as a floor); a shrink with two restarts for one failure misses; a run without a
benchmark's figures gets none of its rows; the Markdown marks a miss.
"""

from __future__ import annotations

from typing import Any

from bench.targets import checks, table


def scenario(p50: float, p99: float, restarts: list[int] | None = None) -> dict[str, Any]:
    return {"what": "x", "seconds": [p50, p99], "p50": p50, "p99": p99,
            "restarts": restarts or [1]}  # fmt: skip


def verdicts(results: dict[str, Any]) -> list[bool]:
    return [c.met for c in checks(results)]


def test_recovery_targets_hold_at_their_limits_and_fail_past_them() -> None:
    at_limits = {"worker": scenario(3.0, 6.0), "spare": scenario(5.0, 10.0),
                 "shrink": scenario(5.0, 10.0), "torchrun": scenario(9.0, 12.0)}  # fmt: skip
    assert verdicts({"recovery": {"scenarios": at_limits}}) == [True, True, True, True]
    past = at_limits | {"worker": scenario(3.01, 1.0), "shrink": scenario(1.0, 2.0, [1, 2])}
    assert verdicts({"recovery": {"scenarios": past}}) == [False, True, True, False]


def test_goodput_target_reads_phalanx_at_60_seconds() -> None:
    runs = [
        {"system": "phalanx", "interval": 60, "goodput": 0.9, "kills": [1.0], "window": 180},
        {"system": "torchrun", "interval": 60, "goodput": 0.5, "kills": [1.0], "window": 180},
        {"system": "phalanx", "interval": 30, "goodput": 0.1, "kills": [1.0], "window": 180},
    ]
    assert verdicts({"intervals": {"runs": runs}}) == [True]
    runs[0]["goodput"] = 0.899
    assert verdicts({"intervals": {"runs": runs}}) == [False]


def test_checkpoint_targets_compare_async_with_sync_and_memory_with_the_step() -> None:
    model = {"model": "m", "async_blocked": 0.1, "sync_blocked": 1.0,
             "memory_share_of_step_time": 0.02}  # fmt: skip
    assert verdicts({"checkpoint": {"models": [model]}}) == [True, True]
    model |= {"async_blocked": 0.11, "memory_share_of_step_time": 0.021}
    assert verdicts({"checkpoint": {"models": [model]}}) == [False, False]


def test_controlplane_targets_read_the_largest_count_and_rss_in_megabytes() -> None:
    small = {"jobs": 10, "pods": 80, "all_created": 999.0, "reconcile_p99": 9.0,
             "peak_rss_mib": 999.0}  # fmt: skip
    large = {"jobs": 1000, "pods": 8000, "all_created": 60.0, "reconcile_p99": 1.0,
             "peak_rss_mib": 286.0}  # 286 MiB = 299.9 MB  # fmt: skip
    assert verdicts({"controlplane": {"series": [small, large]}}) == [True, True, True]
    large["peak_rss_mib"] = 287.0  # 300.9 MB
    assert verdicts({"controlplane": {"series": [small, large]}}) == [True, True, False]
    large["reconcile_p99"] = 30.0  # past the histogram's last finite bucket: a floor
    p99 = checks({"controlplane": {"series": [large]}})[1]
    assert (p99.measured, p99.met) == (">= 30000 ms (past the last bucket)", False)


def test_a_run_without_figures_has_no_targets_and_a_miss_is_marked() -> None:
    assert table({"about": {}}) == []
    rows = table({"checkpoint": {"models": [{"model": "m", "async_blocked": 0.5,
                                             "sync_blocked": 1.0,
                                             "memory_share_of_step_time": 0.0}]}})  # fmt: skip
    assert rows[2].endswith("| **no** |")
    assert rows[3].endswith("| yes |")
