"""The targets the suite's figures are held to, each checked against one run's JSON.

Why in one table: a reader should see at a glance which claims hold on the stated machine and
which do not, and the note of a missed target must start from the measured figure, not a
memory of it. The targets come from the issues that set them: recovery and goodput from the
fast-recovery work, checkpoint blocking and the control plane from the benchmark issue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phalanx.operator.metrics import RECONCILE_BUCKETS

Figures = dict[str, Any]
MB_PER_MIB = 2**20 / 10**6
RECONCILE_TOP_BUCKET = float(RECONCILE_BUCKETS[-1])
"""The last finite bucket of the operator's reconcile histograms: a quantile past it reads as
this value, so it means "at least"."""


def reconcile_latency(seconds: float) -> str:
    """A reconcile (or reconcile part) quantile in ms, or a floor where it is past the
    histogram's last bucket."""
    if seconds >= RECONCILE_TOP_BUCKET:
        return f">= {RECONCILE_TOP_BUCKET * 1000:.0f} ms (past the last bucket)"
    return f"{seconds * 1000:.0f} ms"


@dataclass(frozen=True)
class Check:
    """One target and what one run measured for it."""

    target: str
    measured: str
    met: bool


def _recovery(scenarios: Figures) -> list[Check]:
    limits = {"worker": (3.0, 6.0), "spare": (5.0, 10.0), "shrink": (5.0, 10.0)}
    checks = []
    for name, (p50, p99) in limits.items():
        s = scenarios.get(name)
        if s is None or s["p50"] is None:
            continue
        checks.append(Check(
            f"recovery, {s['what']}: p50 <= {p50:g} s, p99 <= {p99:g} s",
            f"{s['p50']:.2f} s / {s['p99']:.2f} s ({len(s['seconds'])} failures)",
            s["p50"] <= p50 and s["p99"] <= p99,
        ))  # fmt: skip
    shrink = scenarios.get("shrink")
    if shrink is not None and shrink["restarts"]:
        checks.append(Check("a node lost without a spare: exactly one restart per failure",
                            f"restarts per failure: {shrink['restarts']}",
                            shrink["restarts"] == [1]))  # fmt: skip
    return checks


def _goodput(intervals: Figures) -> list[Check]:
    run = next((r for r in intervals["runs"]
                if r["system"] == "phalanx" and r["interval"] == 60), None)  # fmt: skip
    if run is None:
        return []
    return [Check("goodput with a worker killed every 60 s >= 90 %",
                  f"{run['goodput']:.1%} ({len(run['kills'])} failures in {run['window']:.0f} s)",
                  run["goodput"] >= 0.9)]  # fmt: skip


def _checkpoint(figures: Figures) -> list[Check]:
    checks = []
    for m in figures["models"]:
        share = m["async_blocked"] / m["sync_blocked"]
        checks.append(Check(f"{m['model']}: async save blocks <= 10 % of a sync save",
                            f"{share:.1%} ({m['async_blocked'] * 1000:.0f} of "
                            f"{m['sync_blocked'] * 1000:.0f} ms)", share <= 0.10))  # fmt: skip
        memory = m["memory_share_of_step_time"]
        checks.append(Check(f"{m['model']}: in-memory snapshots block <= 2 % of step time",
                            f"{memory:.2%}", memory <= 0.02))  # fmt: skip
    return checks


def _controlplane(series: list[Figures]) -> list[Check]:
    last = series[-1]
    rss_mb = last["peak_rss_mib"] * MB_PER_MIB
    return [
        Check(f"{last['pods']} pods created <= 60 s after the apply (target set at 8 000)",
              f"{last['all_created']:.1f} s", last["all_created"] <= 60),
        Check(f"reconcile p99 <= 1 s at {last['jobs']} jobs",
              reconcile_latency(last["reconcile_p99"]), last["reconcile_p99"] <= 1.0),
        Check(f"operator RSS <= 300 MB at {last['jobs']} jobs", f"{rss_mb:.0f} MB", rss_mb <= 300),
    ]  # fmt: skip


def checks(results: Figures) -> list[Check]:
    """Every target the run has figures for, in the report's order."""
    found: list[Check] = []
    if "recovery" in results:
        found += _recovery(results["recovery"]["scenarios"])
    if "intervals" in results:
        found += _goodput(results["intervals"])
    if "checkpoint" in results:
        found += _checkpoint(results["checkpoint"])
    if results.get("controlplane", {}).get("series"):
        found += _controlplane(results["controlplane"]["series"])
    return found


def table(results: Figures) -> list[str]:
    """The targets as Markdown rows, with a header; empty when the run measured none."""
    rows = checks(results)
    if not rows:
        return []
    return [
        "| target | measured | met |",
        "| --- | --- | --- |",
        *(f"| {c.target} | {c.measured} | {'yes' if c.met else '**no**'} |" for c in rows),
    ]
