"""The report's goodput section and plot: each system's median over its repeats with their
range, node losses, and the intervals derived from the measured terms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

from bench.common import stats
from bench.common.report_format import pct as _pct
from bench.common.report_format import ratio as _ratio
from bench.recovery.goodput import job
from bench.recovery.intervals import STEP_KINDS, bound

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

Figures = dict[str, Any]
COLOURS = {"phalanx": "tab:blue", "torchrun": "tab:orange"}


def _group(runs: list[Figures], system: str, failure: str, interval: float | None) -> list[Figures]:
    """A figure's repeats: the runs of one system, failure kind and interval."""
    return [r for r in runs if r["system"] == system and r.get("failure", "worker") == failure
            and r["interval"] == interval]  # fmt: skip


def goodput_plot(figures: Figures, path: Path) -> None:
    """Goodput against the failure interval: each system's median over its repeats (bars: the
    lowest and highest run), and its bound."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    runs = figures["runs"]
    intervals = sorted({r["interval"] for r in runs if r["interval"]
                        and r.get("failure", "worker") == "worker"})  # fmt: skip
    for system, colour in COLOURS.items():
        groups = [(m, _group(runs, system, "worker", m)) for m in intervals]
        groups = [(m, g) for m, g in groups if g]
        if not groups:
            continue
        xs = [m for m, _ in groups]
        values = [[r["goodput"] for r in g] for _, g in groups]
        mids = [stats.median(v) for v in values]
        ax.errorbar(xs, mids, yerr=[[m - min(v) for m, v in zip(mids, values, strict=True)],
                                    [max(v) - m for m, v in zip(mids, values, strict=True)]],
                    fmt="o-", color=colour, capsize=3, label=f"{system}, measured")  # fmt: skip
        terms = figures["bounds"][system]
        ax.plot(xs, [stats.median([bound(terms, r) for r in g]) for _, g in groups], "--",
                color=colour, label=f"{system}, bound")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(intervals, [f"{m:g}" for m in intervals])
    ax.minorticks_off()
    ax.set_xlabel("seconds between failures (one worker SIGKILLed)")
    ax.set_ylabel("goodput")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _spread(values: list[float]) -> str:
    """`96.8% (96.1-97.2%, 3 runs)`: the median and the range of a figure's repeats."""
    if len(values) == 1:
        return f"{_pct(values[0])} (one run)"
    return (f"{_pct(stats.median(values))} ({min(values) * 100:.1f}-{_pct(max(values))}, "
            f"{len(values)} runs)")  # fmt: skip


def _goodput_section(figures: Figures) -> list[str]:
    runs, terms = figures["runs"], figures["bounds"]
    intervals = sorted({r["interval"] for r in runs if r["interval"]
                        and r.get("failure", "worker") == "worker"})  # fmt: skip

    def cell(group: list[Figures]) -> str:
        if not group:
            return "-"
        kills = sorted({len(r["kills"]) for r in group})
        bounds = stats.median([bound(terms[r["system"]], r) for r in group])
        return (f"{'/'.join(map(str, kills))} each, {_spread([r['goodput'] for r in group])}, "
                f"bound {_pct(bounds)}")  # fmt: skip

    lines = [
        "| failures | Phalanx: failures, goodput (median, range), bound "
        "| torchrun: failures, goodput (median, range), bound | goodput, Phalanx / torchrun "
        "(medians) |",
        "| --- | --- | --- | --- |",
    ]
    for m in [None, *intervals]:
        ours, theirs = _group(runs, "phalanx", "worker", m), _group(runs, "torchrun", "worker", m)
        ratio = (_ratio(stats.median([r["goodput"] for r in ours]),
                        stats.median([r["goodput"] for r in theirs]))
                 if ours and theirs else "-")  # fmt: skip
        what = "none" if m is None else f"a worker killed every {m:g} s"
        lines.append(f"| {what} | {cell(ours)} | {cell(theirs)} | {ratio} |")
    ours, theirs = _group(runs, "phalanx", "large", None), _group(runs, "torchrun", "large", None)
    if ours or theirs:
        ratio = (_ratio(stats.median([r["goodput"] for r in ours]),
                        stats.median([r["goodput"] for r in theirs]))
                 if ours and theirs else "-")  # fmt: skip
        lines.append(f"| none, {LARGE_MODEL} | {_spread([r['goodput'] for r in ours])} "
                     f"| {_spread([r['goodput'] for r in theirs])} | {ratio} |")  # fmt: skip
    for m in sorted({r["interval"] for r in runs if r.get("failure") == "node"}):
        lines.append(f"| a node lost every {m:g} s (a hot spare; the machine back 5 s later) "
                     f"| {cell(_group(runs, 'phalanx', 'node', m))} | no like for like: torchrun "
                     "runs on one agent here | - |")  # fmt: skip
    derived = figures.get("derived", {})
    for m in sorted({float(k) for d in derived.values() for k in d["goodput"]}):
        values = {s: derived[s]["goodput"][f"{m:g}"] for s in derived}
        ours, theirs = values.get("phalanx", []), values.get("torchrun", [])
        ratio = _ratio(stats.median(ours), stats.median(theirs)) if ours and theirs else "-"
        lines.append(f"| a worker killed every {m:g} s, **derived** (not run) "
                     f"| {_spread(ours) if ours else '-'} | {_spread(theirs) if theirs else '-'} "
                     f"| {ratio} |")  # fmt: skip
    b = figures["bounds"]
    lost = {s: d["lost_per_failure"] for s, d in derived.items() if d["lost_per_failure"]}
    lines += [
        "",
        "The bound's terms, measured (medians over the repeats): "
        + "; ".join(
            f"{s}: saves block {_pct(b[s]['save_share'])} of the time, tau {b[s]['tau']:.2f} s, "
            f"median recovery R {b[s]['recovery']:.2f} s"
            for s in COLOURS
        )
        + f". Recovery, torchrun / Phalanx: "
        f"{_ratio(b['torchrun']['recovery'], b['phalanx']['recovery'])}. Each run's bound takes "
        "its own failure interval (its window over the failures that struck: a kill waits for a "
        "worker to exist). Goodput = steps kept x the run's median step time / the time from "
        "its first step to the end; the bound counts half a resume spacing of redone work per "
        "failure, which a resume from memory snapshots beats when the survivors' snapshot is "
        "newer (the measured figure is then above its bound).",
    ]
    lines += _gap_lines(runs)
    if lost:
        lines += ["", "Derived rows: each repeat's goodput without failures less the time one "
                  "failure cost in that repeat's runs with failures ((G0 - G) x window / "
                  "failures, the median over its intervals), divided by the interval; the time "
                  "a failure cost, per repeat: " + "; ".join(
                      f"{s} " + ", ".join(f"{v:.2f} s" for v in values)
                      for s, values in lost.items()) + "."]  # fmt: skip
    return lines


def _gap_lines(runs: list[Figures]) -> list[str]:
    """Where the time of the runs without failures went, Phalanx beside torchrun."""
    cadence = job(1).spec.checkpoint
    rows = []
    for failure, name in (("worker", "the quickstart"), ("large", "117.5 M")):
        for system in COLOURS:
            group = _group(runs, system, failure, None)
            if not group:
                continue
            cells = " | ".join(f"{stats.median([r['above_median'][k] for r in group]):.2f} s"
                               for k in STEP_KINDS)  # fmt: skip
            firsts = [r["first_step"] for r in group if r["first_step"] is not None]
            start = stats.median(firsts or [0.0])
            rows.append(f"| {name}, {system} | {start:.1f} s | {cells} |")
    if not rows:
        return []
    return [
        "",
        f"Where the runs without failures lost time: seconds their steps took beyond the run's "
        f"median step, by what the step before saved (a checkpoint every "
        f"{cadence.interval_steps} steps; Phalanx's memory snapshot every "
        f"{cadence.memory_interval_steps}; torchrun's steps of the same numbers save nothing); "
        "medians over the repeats. The first of a kind touches new host buffers, once per run. "
        "Start: seconds from the run's start to its first step's end, which goodput leaves out "
        "for both (Phalanx's includes its agents' start and, within the first optimizer step, "
        "making its snapshot memory).",
        "",
        "| run | start | " + " | ".join(STEP_KINDS) + " |",
        "| --- | --- |" + " --- |" * len(STEP_KINDS),
        *rows,
    ]


LARGE_MODEL = "117.5 M parameters, real compute (2 nodes x 1 process, about 1.3 s a step)"
"""The "large" rows' job (bench.recovery.goodput's LARGE_MODEL)."""

GOODPUT_NOTE = (
    "**Local backend**: the quickstart job (4 nodes x 1 process, a 75 072-parameter model whose "
    "compute is a 0.1 s sleep) as process groups on this machine; every figure is the median of "
    "its repeats (each repeat runs every row back to back), with their range. Real pods: "
    '"Faults on kind".'
)
