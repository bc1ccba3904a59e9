"""The README's table of headline figures, written from the suite's JSON and the kind records by
`python -m bench.report`, between the README's `bench-table` markers: the same run as
docs/benchmarks.md, never typed by hand. A row whose figures the run does not hold is left out.

Why generated: a hand-kept table drifts from the report it summarises (issue 29 found rows that
no run supported). Every ratio here sets two sides measured in the same run side by side.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import targets
from bench.common import stats

Figures = dict[str, Any]
Row = tuple[str, str, str, str, str]
START, END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"


def _s(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f} s"


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _x(theirs: float, ours: float, digits: int = 1) -> str:
    return f"{theirs / ours:.{digits}f}x" if ours > 0 else "-"


def _p50_tail(values: list[float]) -> str:
    tail = stats.tail(values)
    return f"{_s(stats.median(values))} / {tail.label} {_s(tail.value)}"


def recovery_rows(results: Figures) -> list[Row]:
    scenarios = results.get("recovery", {}).get("scenarios", {})
    seconds = {k: s["seconds"] for k, s in scenarios.items() if s.get("seconds")}
    rows: list[Row] = []
    for ours, theirs, what in (
        ("worker", "torchrun", "a worker SIGKILLed → training again, p50 / tail (toy model)"),
        ("worker-large", "torchrun-large", "a worker SIGKILLed → training again, p50 / tail, "
         "117.5 M parameters with real compute (2 nodes)"),
    ):  # fmt: skip
        if ours in seconds and theirs in seconds:
            rows.append(("local backend", what, _p50_tail(seconds[ours]),
                         f"`torchrun --max-restarts`, same trainer and model, counted from its "
                         f"restart: {_p50_tail(seconds[theirs])}",
                         _x(stats.median(seconds[theirs]), stats.median(seconds[ours]))))  # fmt: skip
    if "spare" in seconds and "shrink" in seconds:
        rows.append(("local backend", "a node lost → training again, p50: with a hot spare / "
                     "shrinking", f"{_s(stats.median(seconds['spare']))} / "
                     f"{_s(stats.median(seconds['shrink']))}", "", ""))  # fmt: skip
    return rows


def _goodputs(figures: Figures, system: str, failure: str, interval: float | None) -> list[float]:
    return [r["goodput"] for r in figures.get("runs", []) if r["system"] == system
            and r.get("failure", "worker") == failure and r["interval"] == interval]  # fmt: skip


def goodput_rows(results: Figures) -> list[Row]:
    figures = results.get("intervals")
    if not figures:
        return []
    rows: list[Row] = []
    worker = sorted({r["interval"] for r in figures["runs"]
                     if r["interval"] and r.get("failure", "worker") == "worker"})  # fmt: skip
    for interval in [None, *worker]:
        ours, theirs = (_goodputs(figures, s, "worker", interval) for s in ("phalanx", "torchrun"))
        if not ours or not theirs:
            continue
        what = "no failures" if interval is None else f"a worker killed every {interval:g} s"
        rows.append(("local backend", f"goodput, {what} {_runs(ours)}",
                     _median_range(ours), f"torchrun: {_median_range(theirs)}",
                     _x(stats.median(ours), stats.median(theirs), 2)))  # fmt: skip
    for interval in sorted({r["interval"] for r in figures["runs"] if r.get("failure") == "node"}):
        ours = _goodputs(figures, "phalanx", "node", interval)
        rows.append(("local backend", f"goodput, a node lost every {interval:g} s, a hot spare "
                     f"{_runs(ours)}", _median_range(ours),
                     "no like for like: torchrun runs on one agent here", ""))  # fmt: skip
    derived = figures.get("derived", {})
    for key in sorted(derived.get("phalanx", {}).get("goodput", {}), key=float):
        ours = derived["phalanx"]["goodput"][key]
        theirs = derived.get("torchrun", {}).get("goodput", {}).get(key, [])
        if ours and theirs:
            rows.append(("local backend", f"goodput, a worker killed every {key} s: **derived** "
                         "from each repeat's measured terms, not run", _median_range(ours),
                         f"torchrun: {_median_range(theirs)}",
                         _x(stats.median(ours), stats.median(theirs), 2)))  # fmt: skip
    return rows


def _runs(values: list[float]) -> str:
    return "(one run)" if len(values) == 1 else f"(median of {len(values)} runs, range)"


def _median_range(values: list[float]) -> str:
    if len(values) == 1:
        return _pct(values[0])
    return f"{_pct(stats.median(values))} ({min(values):.1%}-{max(values):.1%})"


def _newest(records: list[Figures], case: str) -> Figures | None:
    return next((r for r in reversed(records) if r.get("case") == case), None)


def kind_rows(records: list[Figures]) -> list[Row]:
    rows: list[Row] = []
    if (r := _newest(records, "worker-killed")) is not None:
        rows.append(("kind", "a worker SIGKILLed, default settings",
                     f"found in {_s(r['fault_to_decision_s'], 1)} ({r['failure']}); training again "
                     f"{_s(r['fault_to_first_step_s'], 1)}", "", ""))  # fmt: skip
    if (r := _newest(records, "silent-node-spare")) is not None and r.get("node_not_ready_s"):
        grace = r.get("node_monitor_grace_s")
        rows.append(("kind", "a frozen node (`docker pause`: sockets open, kubelet silent), default "
                     "settings" + (f", the cluster's node-monitor grace period {grace:g} s"
                                   if grace else ""),
                     f"found in {_s(r['fault_to_decision_s'], 1)} by its peers' agents "
                     f"(PeerSilent); training again {_s(r['fault_to_first_step_s'], 1)} with a "
                     "spare", f"Kubernetes' NodeReady on the same cluster in the same run: "
                     f"{_s(r['node_not_ready_s'], 1)}",
                     _x(r["node_not_ready_s"], r["fault_to_decision_s"])))  # fmt: skip
    for case, what in (
        ("partition-spare", "a partition: every packet between node ranks 0 and 1 dropped, "
         "default settings"),
        ("rank-hung", "a rank SIGSTOPped, `hangTimeoutSeconds: 10`"),
        ("rank-hung-default", "a rank SIGSTOPped, default settings"),
        ("rank-stalled-default", "a rank that stalls while alive (ptrace-held), default settings"),
    ):  # fmt: skip
        if (r := _newest(records, case)) is not None:
            found = (r.get("failures") or ["?"])[0]
            rows.append(("kind", what, f"found in {_s(r['fault_to_decision_s'], 1)} ({found}); "
                         f"training again {_s(r['fault_to_first_step_s'], 1)}", "", ""))  # fmt: skip
    return rows


def detection_rows(results: Figures) -> list[Row]:
    detection = results.get("detection", {})
    scenarios, baseline = detection.get("scenarios", {}), detection.get("torchrun_hang") or {}
    rows: list[Row] = []
    if (hung := scenarios.get("hang-rank")) and hung.get("seconds"):
        ours = stats.median(hung["seconds"])
        if baseline.get("decision") is not None:
            theirs = (
                f"`torchrun --max-restarts`, same trainer and settings: restarts at "
                f"{baseline['decision']:.0f} s"
                + (
                    f", training again at {baseline['training_again']:.0f} s"
                    if baseline.get("training_again")
                    else ""
                )
            )
            ratio = _x(baseline["decision"], ours)
        else:
            theirs = (f"`torchrun --max-restarts`: no restart within its {baseline['limit']:.0f} s "
                      "limit" if baseline else "")  # fmt: skip
            ratio = f">{baseline['limit'] / ours:.0f}x" if baseline else ""
        rows.append(("local backend", "a rank hung (its worker SIGSTOPped, its agent running), "
                     "`hangTimeoutSeconds: 10`", f"found in {_s(ours, 1)} (Hang)", theirs, ratio))  # fmt: skip
    if (node := scenarios.get("hang")) and node.get("seconds"):
        rows.append(("local backend", "a node hung (every process of its pod SIGSTOPped)",
                     f"found in {_s(stats.median(node['seconds']), 1)} by its peers' agents "
                     "(PeerSilent)", "", ""))  # fmt: skip
    return rows


def checkpoint_rows(results: Figures) -> list[Row]:
    models = results.get("checkpoint", {}).get("models", [])
    if not models:
        return []
    m = max(models, key=lambda m: m["parameters"])
    sync = m["sync_blocked"]
    return [("local backend", f"training blocked by a checkpoint ({m['parameters'] / 1e6:.1f} M "
             "parameters)", f"async {m['async_blocked'] * 1000:.0f} ms, in memory "
             f"{m['memory_blocked'] * 1000:.0f} ms",
             f"the fastest sync save measured ({m.get('sync_best', 'DCP, 1 writer thread')}, "
             f"fsynced): {sync * 1000:.0f} ms", _x(sync, m["async_blocked"]))]  # fmt: skip


def controlplane_rows(results: Figures) -> list[Row]:
    series = results.get("controlplane", {}).get("series", [])
    if not series:
        return []
    s = max(series, key=lambda s: s["jobs"])
    rows: list[Row] = [
        ("kwok", f"{s['jobs']:,} TrainingJobs x {s['nodes']} pods: apply → all pods created "
         "/ Running".replace(",", " "), f"{s['all_created']:.0f} / {s['all_running']:.0f} s",
         "", "")]  # fmt: skip
    for b in s.get("baselines", []):
        rows.append(("kwok", f"the same jobs' pods created, beside the {b['system']}",
                     f"{s['all_created']:.0f} s", f"{b['all_created']:.0f} s",
                     _x(b["all_created"], s["all_created"], 2)))  # fmt: skip
    return rows


def api_rows(results: Figures) -> list[Row]:
    api = results.get("api", {})
    found = {(s["operation"], s["side"]): s for s in api.get("series", [])
             if s["mode"] == "sequential"}  # fmt: skip
    listing = next((op for op, _ in found if op.startswith("list")), None)
    if listing is None or (listing, "kube") not in found or ("get one job", "kube") not in found:
        return []

    def side(name: str) -> str:
        lst, get = found[(listing, name)], found[("get one job", name)]
        size = f" ({lst['bytes'] / 1024:.1f} KiB)" if lst.get("bytes") else ""
        return f"{lst['p50'] * 1000:.1f} ms{size} / {get['p50'] * 1000:.2f} ms"

    return [("loopback, the real API server", f"REST reads at {api['jobs']} jobs, p50, TLS on "
             f"both sides: a page ({listing}) / one job", f"{side('API')} (summaries, from the "
             "service's cache)", f"the kube API: {side('kube')} (whole objects)",
             "not the same payload: no ratio")]  # fmt: skip


SECTIONS: tuple[Callable[[Figures], list[Row]], ...] = (
    recovery_rows,
    goodput_rows,
    detection_rows,
    checkpoint_rows,
    controlplane_rows,
    api_rows,
)


def table(results: Figures, kind: list[Figures]) -> str:
    rows = [row for section in SECTIONS for row in section(results)]
    rows[len(recovery_rows(results)) + len(goodput_rows(results)) : 0] = kind_rows(kind)
    lines = ["| where | what | Phalanx | baseline, same run | ratio |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join([*lines, "", verdicts(results, kind)])


def verdicts(results: Figures, kind: list[Figures]) -> str:
    """How the project's targets stand in this run: counts, and each one missed, with its
    figure (the report's Targets table has them all)."""
    checks = targets.checks(results, kind)
    by_target: dict[str, list[targets.Check]] = {}
    for check in checks:
        by_target.setdefault(check.target.id, []).append(check)
    met = [t for t, cs in by_target.items() if all(c.met for c in cs)]
    unmeasured = [t for t, cs in by_target.items() if all(c.met is None for c in cs)]
    missed = [c for c in checks if c.met is False]
    text = (f"Of the project's {len(by_target)} targets this run met {len(met)}, missed "
            f"{len({c.target.id for c in missed})} and did not measure {len(unmeasured)} (the "
            "report's Targets table lists each).")  # fmt: skip
    if missed:
        text += " Missed: " + "; ".join(f"{c.target.what} ({c.measured})" for c in missed) + "."
    return text


def rewrite(readme: Path, text: str) -> None:
    """Replace what lies between the markers in `readme` with `text`."""
    content = readme.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(content):
        raise ValueError(f"{readme} has no {START} ... {END} markers")
    readme.write_text(pattern.sub(lambda _: f"{START}\n{text}\n{END}", content))
