"""The project's targets (bench/targets.toml), each checked against one run's figures.

Why one table read from one file: a reader should see at a glance which claims hold on the stated
machine, which do not, and which nothing has measured yet; a target left out of the table reads
as met. Every target in the file gets a row: a checker below turns the run's figures into the
measured value and the verdict, and a target without figures (or without a checker) reads "not
measured". The note of a missed target must start from the measured figure, not a memory of it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from bench.common import stats
from bench.common.target_base import Checker, Figures, KindRecords, Measured
from bench.controlplane.targets_controlplane import CONTROLPLANE_CHECKERS

TARGETS_FILE = Path(__file__).with_name("targets.toml")


@dataclass(frozen=True)
class Target:
    """One line of targets.toml."""

    id: str
    what: str
    where: str
    issue: int


def load(path: Path = TARGETS_FILE) -> list[Target]:
    return [Target(**entry) for entry in tomllib.loads(path.read_text())["target"]]


@dataclass(frozen=True)
class Check:
    """One row of the table: a target and what the run measured for it."""

    target: Target
    measured: str
    met: bool | None
    """None: not measured."""


def _recovery(name: str, p50_limit: float, p99_limit: float) -> Checker:
    def check(results: Figures, _: KindRecords) -> list[Measured]:
        scenario = results.get("recovery", {}).get("scenarios", {}).get(name)
        if not scenario or not scenario["seconds"]:
            return []
        seconds = scenario["seconds"]
        p50, tail = stats.median(seconds), stats.tail(seconds)
        # The maximum is at least the p99: a maximum within the p99's limit meets it.
        return [Measured(f"p50 {p50:.2f} s, {tail.label} {tail.value:.2f} s",
                         p50 <= p50_limit and tail.value <= p99_limit)]  # fmt: skip

    return check


def _shrink_restarts(results: Figures, _: KindRecords) -> list[Measured]:
    shrink = results.get("recovery", {}).get("scenarios", {}).get("shrink")
    if not shrink or not shrink["restarts"]:
        return []
    return [Measured(f"restarts per failure: {shrink['restarts']}", shrink["restarts"] == [1])]


def _goodput(interval: int, floor: float) -> Checker:
    """Phalanx's goodput with a worker killed every `interval` s: the median of its runs, or,
    where the interval was not run, the figure derived from the measured terms, said so."""

    def check(results: Figures, _: KindRecords) -> list[Measured]:
        figures = results.get("intervals", {})
        runs = [r for r in figures.get("runs", []) if r["system"] == "phalanx"
                and r.get("failure", "worker") == "worker" and r["interval"] == interval]  # fmt: skip
        if runs:
            values = [r["goodput"] for r in runs]
            kills = sorted({len(r["kills"]) for r in runs})
            windows = sorted({round(r["window"]) for r in runs})
            return [Measured(f"{stats.median(values):.1%}, median of {len(runs)} run"
                             f"{'' if len(runs) == 1 else 's'} ({min(values):.1%} to "
                             f"{max(values):.1%}; a worker killed, {'/'.join(map(str, kills))} "
                             f"failures in {'/'.join(map(str, windows))} s)",
                             stats.median(values) >= floor)]  # fmt: skip
        derived = (
            figures.get("derived", {}).get("phalanx", {}).get("goodput", {}).get(f"{interval:g}")
        )
        if not derived:
            return []
        return [Measured(f"{stats.median(derived):.1%}, derived (not run): the median of "
                         f"{len(derived)} repeats' G0 - lost per failure / {interval} s "
                         f"({min(derived):.1%} to {max(derived):.1%})",
                         stats.median(derived) >= floor)]  # fmt: skip

    return check


def _worst(values: list[float]) -> str:
    """`12.3 s (the worst of 3 runs)`, or `(one run)`."""
    return f"{max(values):.1f} s " + ("(one run)" if len(values) == 1 else
                                      f"(the worst of {len(values)} runs)")  # fmt: skip


def _kind_cases(records: KindRecords, case: str) -> KindRecords:
    return [r for r in records if r.get("case") == case]


def _kind_figure(case: str, key: str, limit: float) -> Checker:
    """Every recorded kind run of `case` within `limit` (the worst one shown)."""

    def check(_: Figures, records: KindRecords) -> list[Measured]:
        values = [r[key] for r in _kind_cases(records, case) if r.get(key) is not None]
        if not values:
            return []
        return [Measured(_worst(values), max(values) <= limit)]

    return check


def _kind_recovery(_: Figures, records: KindRecords) -> list[Measured]:
    found = []
    for case, what in (("worker-killed", "worker killed"), ("node-lost-spare", "node lost, spare")):
        values = [r["fault_to_first_step_s"] for r in _kind_cases(records, case)
                  if r.get("fault_to_first_step_s") is not None]  # fmt: skip
        if values:
            runs = "one run" if len(values) == 1 else f"p50 of {len(values)} runs"
            found.append(Measured(f"{what}: {stats.median(values):.1f} s ({runs})",
                                  stats.median(values) <= 10.0))  # fmt: skip
    return found


def _hang_decision(results: Figures, records: KindRecords) -> list[Measured]:
    """Each hang the suites measure: a frozen node and a hung rank on the local backend (runs
    before the rank scenario existed have only the node), and a hung rank on kind."""
    found = []
    scenarios = results.get("detection", {}).get("scenarios", {})
    for name, what in (("hang", "a node hung"), ("hang-rank", "a rank hung")):
        seconds = scenarios.get(name, {}).get("seconds")
        if seconds:
            median = stats.median(seconds)
            found.append(Measured(f"{what}, local backend: {median:.1f} s (median of "
                                  f"{len(seconds)})", median <= 5.0))  # fmt: skip
    kind = [r["fault_to_decision_s"] for r in _kind_cases(records, "rank-hung")
            if r.get("fault_to_decision_s") is not None]  # fmt: skip
    if kind:
        found.append(Measured(f"a rank hung, kind, hangTimeoutSeconds 10: {_worst(kind)}",
                              max(kind) <= 5.0))  # fmt: skip
    return found


DEFAULT_GRACE_SECONDS = 40.0
"""The shortest node-monitor grace period Kubernetes has defaulted to (40 s; 50 s since v1.32):
a cluster at or above it counts as at Kubernetes' default."""


def _silent_node_default_grace(_: Figures, records: KindRecords) -> list[Measured]:
    runs = [r for r in _kind_cases(records, "silent-node-spare")
            if (r.get("node_monitor_grace_s") or 0) >= DEFAULT_GRACE_SECONDS]  # fmt: skip
    if not runs:
        return []
    worst = max(runs, key=lambda r: r["fault_to_first_step_s"])
    restarts = {(r.get("events") or []).count("Restart") for r in runs}
    return [Measured(
        f"decision {worst['fault_to_decision_s']:.1f} s, training again "
        f"{worst['fault_to_first_step_s']:.1f} s, restarts {sorted(restarts)} (grace period "
        f"{worst['node_monitor_grace_s']:.0f} s; the worst of {len(runs)} runs)",
        all(r["fault_to_decision_s"] <= 10 and r["fault_to_first_step_s"] <= 15 for r in runs)
        and restarts == {1},
    )]  # fmt: skip


LOST_NODE_CASES = ("node-lost", "node-lost-spare", "silent-node-spare", "partition-spare",
                   "pod-deleted", "pod-preempted", "worker-killed", "rank-hung",
                   "rank-hung-default", "rank-stalled-default")  # fmt: skip


def _kind_one_restart(_: Figures, records: KindRecords) -> list[Measured]:
    counts = {
        r["case"]: (r.get("events") or []).count("Restart")
        for r in records
        if r.get("case") in LOST_NODE_CASES
    }  # newest run of each case
    if not counts:
        return []
    wrong = {case: n for case, n in counts.items() if n != 1}
    return [Measured(f"{len(counts)} cases, " + (f"not one: {wrong}" if wrong else "one each"),
                     not wrong)]  # fmt: skip


def _preempted_redone(_: Figures, records: KindRecords) -> list[Measured]:
    redone = [r["steps_redone"] for r in _kind_cases(records, "pod-preempted")
              if "steps_redone" in r]  # fmt: skip
    if not redone:
        return []
    return [Measured(f"steps redone: {redone} ({len(redone)} runs)", max(redone) == 0)]


def _models(results: Figures) -> list[Figures]:
    return list(results.get("checkpoint", {}).get("models", []))


def _async_share(results: Figures, _: KindRecords) -> list[Measured]:
    found = []
    for m in _models(results):
        share = m["async_blocked"] / m["sync_blocked"]
        found.append(Measured(f"{m['model']}: {share:.1%} ({m['async_blocked'] * 1000:.0f} of "
                              f"{m['sync_blocked'] * 1000:.0f} ms)", share <= 0.10))  # fmt: skip
    return found


def _memory_share(limit: float) -> Checker:
    def check(results: Figures, _: KindRecords) -> list[Measured]:
        return [Measured(f"{m['model']}: {m['memory_share_of_step_time']:.2%}",
                         m["memory_share_of_step_time"] <= limit) for m in _models(results)]  # fmt: skip

    return check


def _snapshot_blocking(results: Figures, _: KindRecords) -> list[Measured]:
    """The most a snapshot blocks the loop (bench.snapshot.snapshot: the call and the copy), as a share
    of the steps between two snapshots at the default cadence, per model."""
    found = []
    for m in (results.get("snapshot") or {}).get("figures", []):
        spacing = m.get("default_spacing", 10)  # runs before the cadence had a budget: 10
        share = m["copied"] / (spacing * m["step_seconds"])
        found.append(Measured(f"{m['model']}: {share:.2%} ({m['copied'] * 1000:.0f} ms a snapshot, "
                              f"{m['step_seconds'] * 1000:.0f} ms steps"
                              + (f", every {spacing} steps" if "default_spacing" in m else "")
                              + ")", share <= 0.01))  # fmt: skip
    return found


def _nofail_vs_torchrun(results: Figures, _: KindRecords) -> list[Measured]:
    """Phalanx's median goodput without failures less torchrun's, toy and 117.5 M."""
    runs = (results.get("intervals") or {}).get("runs", [])
    found = []
    for failure, model in (("worker", "toy"), ("large", "117.5 M")):
        calm = {system: [r["goodput"] for r in runs if r["system"] == system
                         and r.get("failure", "worker") == failure and r["interval"] is None]
                for system in ("phalanx", "torchrun")}  # fmt: skip
        if calm["phalanx"] and calm["torchrun"]:
            ours, theirs = stats.median(calm["phalanx"]), stats.median(calm["torchrun"])
            found.append(Measured(f"{model}: {ours:.1%} vs {theirs:.1%} "
                                  f"({(ours - theirs) * 100:+.1f} points)", ours >= theirs - 0.003))  # fmt: skip
    return found


def _fsdp_node_lost(results: Figures, _: KindRecords) -> list[Measured]:
    """The FSDP node lost against the DDP worker kill at 117.5 M parameters, both from the
    suite's recovery run."""
    scenarios = (results.get("recovery") or {}).get("scenarios", {})
    fsdp, ddp = scenarios.get("node-large-fsdp"), scenarios.get("worker-large")
    if not fsdp or not ddp or fsdp["p50"] is None or ddp["p50"] is None:
        return []
    peers = sum(1 for s in fsdp.get("sources", []) if s == "peer")
    ratio = fsdp["p50"] / ddp["p50"]
    return [Measured(f"p50 {fsdp['p50']:.2f} s vs {ddp['p50']:.2f} s ({ratio:.2f}x); from a "
                     f"peer {peers} of {len(fsdp['seconds'])}",
                     ratio <= 2.0 and peers == len(fsdp["seconds"]))]  # fmt: skip


CHECKERS: dict[str, Checker] = {
    "recovery-worker": _recovery("worker", 3.0, 6.0),
    "recovery-spare": _recovery("spare", 5.0, 10.0),
    "recovery-shrink": _recovery("shrink", 5.0, 10.0),
    "shrink-one-restart": _shrink_restarts,
    "goodput-60s": _goodput(60, 0.90),
    "goodput-600s": _goodput(600, 0.98),
    "kind-recovery": _kind_recovery,
    "hang-decision": _hang_decision,
    "hang-10s": _kind_figure("rank-hung", "fault_to_first_step_s", 13.0),
    # A rank that stalls while running (not SIGSTOPped: its agent finds a stopped worker first).
    "hang-default": _kind_figure("rank-stalled-default", "fault_to_first_step_s", 40.0),
    "silent-node-3s": _kind_figure("silent-node-spare", "fault_to_decision_s", 3.0),
    "silent-node-default-grace": _silent_node_default_grace,
    "kind-one-restart": _kind_one_restart,
    "preempted-nothing-redone": _preempted_redone,
    "async-save-share": _async_share,
    "memory-snapshot-2pct": _memory_share(0.02),
    "memory-snapshot-1pct": _snapshot_blocking,
    "goodput-nofail-vs-torchrun": _nofail_vs_torchrun,
    "fsdp-node-lost-from-peer": _fsdp_node_lost,
    **CONTROLPLANE_CHECKERS,
}
"""Targets without a checker here (the GPU overhead) have no benchmark yet: they read "not
measured"."""


def checks(results: Figures, kind: KindRecords | None = None,
           targets: list[Target] | None = None) -> list[Check]:  # fmt: skip
    """One row or more per target of the file, in its order: one per figure measured (a model,
    a case), or one "not measured"."""
    rows = []
    for target in load() if targets is None else targets:
        checker = CHECKERS.get(target.id)
        found = checker(results, kind or []) if checker is not None else []
        if not found:
            rows.append(Check(target, "not measured", None))
        rows += [Check(target, m.value, m.met) for m in found]
    return rows


VERDICTS = {True: "yes", False: "**no**", None: "not measured"}


def table(results: Figures, kind: KindRecords | None = None) -> list[str]:
    """The targets as Markdown rows, with a header; every target of the file has a row."""
    return [
        "| target | on | measured | met | issue |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {c.target.what} | {c.target.where} | {c.measured} | {VERDICTS[c.met]} "
          f"| #{c.target.issue} |" for c in checks(results, kind)),
    ]  # fmt: skip
