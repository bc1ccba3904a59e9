"""`docs/benchmarks.md` and its plots, from the JSON of one `python -m bench` run.

Why a separate step: the figures are measured once (minutes to hours) and the report can be
rewritten from them at any time (`python -m bench.report bench/results/bench.json`), so a change
of wording never tempts anyone to quote a figure from another run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

from bench import readme_table, targets
from bench.common import stats
from bench.common.report_format import pct as _pct
from bench.common.report_format import ratio as _ratio
from bench.controlplane import report_largejob
from bench.controlplane.report_controlplane import controlplane_section
from bench.kind import kind_faults, kind_figures, kind_scheduling
from bench.recovery.report_goodput import GOODPUT_NOTE, _goodput_section, goodput_plot
from bench.snapshot import report_snapshot

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

Figures = dict[str, Any]
"""How many of the operator's request kinds the control-plane section names."""


def timeline_plot(run: Figures, path: Path) -> None:
    """One run: the step and the world size over time, each failure marked."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    times = [s["time"] for s in run["steps"]]
    ax.plot(times, [s["step"] for s in run["steps"]], ".", markersize=2, color="tab:blue")
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("step", color="tab:blue")
    world = ax.twinx()
    world.step(times, [s["world"] for s in run["steps"]], where="post", color="tab:green")
    world.set_ylabel("world size", color="tab:green")
    world.set_ylim(0, max((s["world"] or 0) for s in run["steps"]) + 1)
    for index, kill in enumerate(run["kills"]):
        ax.axvline(
            kill, color="tab:red", alpha=0.5, label="worker SIGKILLed" if index == 0 else None
        )
    ax.legend(loc="upper left")
    ax.set_title(f"{run['system']}: a worker killed every {run['interval']:g} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def controlplane_plot(series: list[Figures], path: Path) -> None:
    """Control-plane latency against the number of jobs."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    jobs = [s["jobs"] for s in series]
    ax.plot(jobs, [s["all_created"] for s in series], "o-", label="apply -> all pods created")
    ax.plot(jobs, [s["all_running"] for s in series], "o-", label="apply -> all jobs Running")
    ax.plot(jobs, [s["storm_recovered"] for s in series], "o-", label="failure storm -> Running")
    ax.plot(jobs, [s["reconcile_p99"] for s in series], "s--", label="reconcile p99")
    ax.plot(jobs, [s["reconcile_p50"] for s in series], "s--", label="reconcile p50")
    ax.set_xlabel("TrainingJobs (8 node pods each)")
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


DETECTION_NOTE = (
    "**Local backend.** A lost node's processes die with it here, so its pods' exits are seen at "
    "the runner's next look (it ticks every 0.2 s): the first two rows time the runner, not a "
    "detection, and are set beside nothing (a silent node on a real cluster, beside Kubernetes' "
    'NodeReady on the same cluster, is in "Faults on kind" below). A hung node (its agent frozen '
    "too) falls silent to its peers' agents (PeerSilent, 4 s without an answer). A hung rank "
    "whose agent still runs is found when the job's step stops moving for its hang timeout: the "
    "quickstart job measured here sets `failurePolicy.hangTimeoutSeconds: 10`; unset, it adapts, "
    "max(30 s, 10 x the step time). The hung rank's baseline is measured in the same run: the "
    "same trainer with the same settings under stock `torchrun --max-restarts=1`, a rank "
    "SIGSTOPped; its peers wait in the collective until the trainer's collective timeout (300 s "
    "unless `spec.nccl.timeoutSeconds` sets it) fails them and torchrun restarts the group (its "
    "decision: the new workers exist)."
)


def _detection_rows(figures: Figures) -> list[str]:
    """The local decisions; the hang beside torchrun's measured handling of the same hang (runs
    before that baseline was measured set unlike figures beside these, and show none)."""
    rows = []
    hang = figures.get("torchrun_hang")
    for name, scenario in figures["scenarios"].items():
        seconds = scenario["seconds"]
        median = stats.median(seconds) if seconds else None
        baseline, ratio = "-", "-"
        if name == "hang-rank" and hang is not None:
            decided = hang["decision"]
            baseline = (f"torchrun, same trainer: restarts at {decided:.0f} s, trains again at "
                        f"{hang['training_again']:.0f} s" if decided is not None and
                        hang["training_again"] is not None else
                        f"torchrun, same trainer: no restart within {hang['limit']:.0f} s")  # fmt: skip
            ratio = _ratio(decided, median) if decided is not None and median else "-"
        rows.append(
            f"| {scenario['what']} | {len(seconds)} "
            f"| {'-' if median is None else f'{median:.2f} s'} "
            f"| {f'{max(seconds):.2f} s' if seconds else '-'} | {baseline} | {ratio} |"
        )
    return rows


def _node_ready(figures: Figures) -> list[str]:
    seconds = figures.get("node_ready_seconds") or []
    if not seconds:
        return []
    return [f"Kubernetes' own detection, measured in the same run on its own (kwok nodes stop "
            f"posting status on the project's API server; the real node lifecycle controller at "
            f"its defaults, a 50 s grace period checked every 5 s): NodeReady no longer True "
            f"after {stats.median(seconds):.1f} s (median of {len(seconds)} nodes, "
            f"{min(seconds):.1f} to {max(seconds):.1f} s).", ""]  # fmt: skip


def _api_rows(series: list[Figures]) -> list[str]:
    """Each read on both sides, without a ratio: the service answers with job summaries from its
    cache, the kube API with whole objects from etcd, so the two sides do not carry the same
    payload (bench/results/suite/api.md gives each side's bytes)."""
    rows = []
    for mode, operation in dict.fromkeys((s["mode"], s["operation"]) for s in series):
        side = {s["side"]: s for s in series if (s["mode"], s["operation"]) == (mode, operation)}
        api, kube = side.get("API"), side.get("kube")
        if api is None or kube is None:
            continue
        rows.append(
            f"| {operation} ({mode}) | {api['p50'] * 1000:.1f} / {api['p99'] * 1000:.1f} ms "
            f"| {api['rate']:.0f} | {kube['p50'] * 1000:.1f} / {kube['p99'] * 1000:.1f} ms "
            f"| {kube['rate']:.0f} |"
        )
    return rows


def _recovery_section(figures: Figures) -> list[str]:
    scenarios = figures["scenarios"]
    lines = ["## Time to recover (local backend): the fault to the first training step of the new "
             "epoch", "",
             "**Local backend**: the quickstart job (4 nodes x 1 process, a 75 072-parameter model "
             "whose compute is a 0.1 s sleep) as process groups on this machine, and beside it the "
             "same trainer with a 117.5 M-parameter model and real compute (forward, backward, "
             "AdamW: about 1.3 s a step on one core; 2 nodes x 1 process); the baseline of each "
             "is stock `torchrun --max-restarts` running the same trainer and model, one worker "
             "SIGKILLed, a recovery counted from the first step after torchrun restarted its "
             "workers. Medians interpolated; the tail is a p99 only from "
             f"{stats.TAIL_SAMPLES} failures or more.", "",
             "| fault | failures | p50 | tail | p50, torchrun / this |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    seconds = {name: s["seconds"] for name, s in scenarios.items() if s["seconds"]}
    for name, s in scenarios.items():
        values = seconds.get(name)
        if not values:
            lines.append(f"| {s['what']} | 0 | - | - | - |")
            continue
        p50, tail = stats.median(values), stats.tail(values)
        baseline = s.get("baseline", "torchrun" if not name.startswith("torchrun") else None)
        theirs = stats.median(seconds[baseline]) if baseline in seconds else None
        ratio = _ratio(theirs, p50) if theirs else "-"
        lines.append(f"| {s['what']} | {len(values)} | {p50:.2f} s "
                     f"| {tail.label}: {tail.value:.2f} s | {ratio} |")  # fmt: skip
    lines += ["", "Where the seconds go (medians, the new epoch's rank 0 from the fault on):", ""]
    lines += [f"- {s['what']}: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["parts"].items())
              for s in scenarios.values() if s["parts"]]  # fmt: skip
    if any(name.endswith("-large") and "sources" not in s for name, s in scenarios.items()):
        lines += ["", "The 117.5 M-parameter rows of this run struck 5 s after each epoch's first "
                  "step, before its first snapshot or checkpoint: those recoveries started "
                  "afresh, with nothing to load. Re-measured with state to load: the next "
                  "section."]  # fmt: skip
    return [*lines, ""]


def _checkpoint_section(figures: Figures) -> list[str]:
    lines = ["## Checkpoint cost: training time blocked per save", "",
             "Blocked per save, and in brackets as a share of step time at the default cadence (a "
             "checkpoint every 100 steps, a memory snapshot every 10); targets: async blocking at "
             "most 10 % of sync, in-memory at most 2 % of step time. Sync is the fastest of three "
             "sync saves of the same state measured in the run (DCP with 1 and with 4 writer "
             "threads, `torch.save` to one file; all fsynced), named in the column.", "",
             "| model | checkpoint | step | blocked, sync (the fastest) | blocked, async | async / sync "
             "| blocked, in memory | sync save / `dd` to the same disk |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for m in figures["models"]:
        lines.append(
            f"| {m['model']} | {m['size_mib']:.0f} MiB | {m['step_seconds'] * 1000:.0f} ms "
            f"| {m['sync_blocked'] * 1000:.0f} ms ({_pct(m['sync_share_of_step_time'])}; "
            f"{m.get('sync_best', 'DCP, 1 writer thread')}) "
            f"| {m['async_blocked'] * 1000:.0f} ms ({_pct(m['async_share_of_step_time'])}) "
            f"| {_pct(m['async_blocked'] / m['sync_blocked'])} "
            f"| {m['memory_blocked'] * 1000:.0f} ms ({_pct(m['memory_share_of_step_time'])}) "
            f"| {m['save_mib_per_s']:.0f} / {m['dd_mib_per_s']:.0f} MiB/s "
            f"({_ratio(m['save_mib_per_s'], m['dd_mib_per_s'])}) |"
        )
    lines += ["", "The sync saves, each: " + "; ".join(
        f"{m['model']}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in m["sync_variants"].items())
        for m in figures["models"] if "sync_variants" in m) + "."]  # fmt: skip
    lines += ["", "Of an async save's blocked time, the `save()` call itself (DCP's planning and "
              "the launch of the upload) took "
              + ", ".join(f"{m['async_call'] * 1000:.0f} ms ({m['model']})"
                          for m in figures["models"] if "async_call" in m)
              + "; the rest is the staging copy into reused host buffers."]  # fmt: skip
    r = figures.get("reshard")
    if r:
        lines += ["", f"Resharded load: {r['model']}, {r['size_mib']:.0f} MiB saved FSDP2-sharded "
                  f"by {r['saved_by']} ranks, loaded by {r['resharded_to']} ranks in "
                  f"{r['resharded_load'] * 1000:.0f} ms, by {r['saved_by']} ranks in "
                  f"{r['same_size_load'] * 1000:.0f} ms: the resharded load takes "
                  f"{_ratio(r['resharded_load'], r['same_size_load'])} the same-size one "
                  "(slowest rank, median of the repeats)."]  # fmt: skip
    return [*lines, ""]


def _later_runs(about: Figures) -> list[str]:
    """The benchmarks re-measured after the run above (`python -m bench --only`), each with its
    own run: a ratio's two sides always come from one benchmark, so from one run."""
    runs = [r for r in about.get("runs") or [] if r["benchmarks"]]
    if not runs:
        return []
    return ["Re-measured since, replacing that run's figures for these benchmarks: "
            + "; ".join(f"{', '.join(r['benchmarks'])} by `{r['command']}`, {r['date']} "
                        f"({r['versions']})" for r in runs) + ".", ""]  # fmt: skip


def render(results: Figures, out: Path) -> str:
    """The report's markdown; its plots are written beside `out` (in `img/`)."""
    img = out.parent / "img"
    img.mkdir(parents=True, exist_ok=True)
    about = results["about"]
    lines = [
        "# Benchmarks",
        "",
        f"One run of `{about['command']}` ({about['mode']} mode), {about['date']}, on "
        f"{about['machine']}. Versions: {about['versions']}. Every figure sits beside its "
        "baseline, measured in the same run, back to back.",
        "",
        "Reproduce: `make bench` (this mode; it builds kube-scheduler and kwok once) or `make "
        "bench-quick` (about 11 minutes here); `python -m bench.report bench/results/suite/bench.json` "
        "rewrites this page from the figures. Seconds each benchmark took: "
        + ", ".join(f"{k} {v:.0f}" for k, v in about["seconds"].items())
        + ".",
        "",
        *_later_runs(about),
    ]
    lines += ["## Targets", "", *targets.table(results, kind_faults.load()), ""]
    # Cluster figures lead where the claim is about clusters: real pods on kind, then the local
    # backend's process groups, each section saying where it ran.
    if faults := kind_faults.load():
        lines += kind_faults.section(faults)
    if kind := kind_figures.load():
        lines += kind_figures.section(kind)
    if sharing := kind_scheduling.load():
        lines += kind_scheduling.section(sharing)
    if "intervals" in results:
        figures = results["intervals"]
        goodput_plot(figures, img / "goodput-vs-interval.png")
        lines += [
            "## Goodput against the failure interval (local backend)",
            "",
            GOODPUT_NOTE,
            "",
            *_goodput_section(figures),
        ]
        lines += ["", "![goodput vs failure interval](img/goodput-vs-interval.png)", ""]
        if figures.get("timeline"):
            timeline_plot(figures["timeline"], img / "timeline.png")
            lines += ["![one Phalanx run: step and world size](img/timeline.png)", ""]
    if "recovery" in results:
        lines += _recovery_section(results["recovery"])
    lines += report_snapshot.peer_section(results.get("recovery"))
    if "detection" in results:
        lines += ["## Detection (local backend): the fault to the planner's decision", "",
                  "| fault | decisions | median | max | the same fault without Phalanx | ratio |",
                  "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        lines += _detection_rows(results["detection"])
        lines += ["", DETECTION_NOTE, "", *_node_ready(results["detection"])]
    if "checkpoint" in results:
        lines += _checkpoint_section(results["checkpoint"])
    lines += report_snapshot.section(results.get("snapshot"))
    if "controlplane" in results:
        series = results["controlplane"]["series"]
        controlplane_plot(series, img / "controlplane.png")
        lines += controlplane_section(series)
        lines += ["", "![control-plane latency vs jobs](img/controlplane.png)", ""]
    if "large_job" in results:
        lines += report_largejob.section(results["large_job"])
    if "api" in results:
        lines += ["## API service: reads from its watch cache beside reads of the same jobs from the kube API",
                  "", f"{results['api']['jobs']} TrainingJobs, the same caller on both sides, on "
                  "loopback with the real API server. Not the same payload, so no ratio: the "
                  "service answers with job summaries from its cache, the kube API with whole "
                  "objects (bench/results/suite/api.md gives each side's bytes and transport).", "",
                  "| read | API p50 / p99 | API req/s | kube p50 / p99 | kube req/s |",
                  "| --- | --- | --- | --- | --- |"]  # fmt: skip
        lines += _api_rows(results["api"]["series"])
        lines.append("")
    text = "\n".join(lines)
    out.write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the JSON `python -m bench` wrote")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"),
                        help="whose bench-table section to rewrite from the same figures")  # fmt: skip
    args = parser.parse_args()
    print(publish(json.loads(args.results.read_text()), args.out, args.readme))
    return 0


def publish(results: Figures, out: Path, readme: Path) -> str:
    """The report at `out` and the README's table, from the same figures; the report's text."""
    text = render(results, out)
    readme_table.rewrite(readme, readme_table.table(results, kind_faults.load()))
    return text


if __name__ == "__main__":
    raise SystemExit(main())
