"""Recovery on the local backend, side by side with stock torchrun in the same run.

The job is the quickstart (deploy/examples/quickstart.yaml: 4 nodes x 1 process, the reference
trainer, DCP every 20 steps, async). Time to recover = the fault -> the first training step of
the new epoch, from the trainer's own step log, so it covers detection, stopping, start-up,
rendezvous, the checkpoint load and one step. Each fault strikes once the current epoch has
trained a few seconds; node ranks are hit in turn (rank 0 included).

Scenarios:
- worker: one worker process SIGKILLed, its pod (agent) survives;
- spare: a node lost (its machine NotReady) with `spares: 1`; a replacement machine joins just
  after, so the spare pool refills in the background before the next fault;
- shrink: a node lost, no spare: one restart at 3 nodes; the machine returns and the job grows
  back (a Grow restart, not counted) before the next fault;
- torchrun: the baseline, `torchrun --standalone --nproc-per-node=4 --max-restarts` (c10d
  rendezvous, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, the fix for pytorch#135712 without which its
  restarts fail here) running the same trainer with the same settings, one worker SIGKILLed.

Goodput: the job with `spares: 1` for M minutes with a node lost every 60 s (the lost machine
comes back 5 s later), and for 10 minutes with one node lost at 5 min (`sparse`); measured from
the step log (kept steps x the steady step time / wall, also without the run's own start-up and
end), with where the rest went, and as the planner's status.goodput.

Baseline for goodput (`nofail`): the same job for `--sparse-minutes` with no failure. Memory
snapshots (`snapshot`): the median step time with and without them, back to back.

Usage: python -m bench.recovery.recovery [--failures 20] [--minutes 10] [--sparse-minutes 10]
                [--only worker,spare,shrink,torchrun,snapshot,nofail,goodput,sparse]
                [--out bench/results/recovery.md] [--json figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import stats
from bench.recovery import torchrun
from bench.recovery.goodput import goodput, job, log_records, snapshot_cost, steps_of
from phalanx.local import Fault, LocalRun, RunOptions, inject

TRAIN_SECONDS_BEFORE_FAULT = 5.0
LARGE_SECONDS_BEFORE_FAULT = 25.0
"""The large model trains this long, and at least 12 steps of the epoch, before a fault: past its
first memory snapshot (every 10 steps), so its recoveries load state rather than start afresh
(they started afresh when it waited 5 s: a resume source of None; FSDP's slower steps needed the
step count too)."""
LARGE = "117.5 M parameters, real compute, 2 nodes"
"""The large model's scenarios (bench.recovery.goodput.LARGE_MODEL), beside the toy's."""
STAGES = ("spawned", "started", "rendezvous", "built", "loaded", "first_step")


@dataclass
class Recovery:
    """One fault and what followed it."""

    seconds: float
    parts: dict[str, float] = field(default_factory=dict)
    restarts: int = 1
    source: str | None = None
    """Where the new epoch resumed from: memory, peer or storage."""


@dataclass
class Injector:
    """Strikes `failures` faults, each once the current epoch has trained a while at full size;
    then stops the run (Ctrl-C, a suspend)."""

    failures: int
    kind: str
    spares: int = 0
    before_fault: float = TRAIN_SECONDS_BEFORE_FAULT
    steps_before_fault: int = 0
    """Also train this many steps of the epoch first (past a memory snapshot: every 10)."""
    start_step: dict[int, int] = field(default_factory=dict)
    first_step: dict[int, datetime] = field(default_factory=dict)
    last_epoch: int = 0
    restore_at: float | None = None

    def __call__(self, run: LocalRun) -> None:
        if self.restore_at is not None and time.monotonic() >= self.restore_at:
            run.cluster.set_capacity(run.job.spec.desired_nodes + self.spares)
            self.restore_at = None
        status, progress = run.status, run.status.progress
        if status.phase != "Running" or progress is None or progress.epoch != status.epoch:
            return
        if status.epoch <= self.last_epoch or progress.updated_at is None:
            return
        if status.nodes < run.job.spec.desired_nodes or status.spares < self.spares:
            return  # grow back, or let the spare pool refill, first
        if len(run.faults) >= self.failures:
            if run.stop_requests == 0:
                run.request_stop()
            return
        first = self.first_step.setdefault(status.epoch, progress.updated_at)
        start = self.start_step.setdefault(status.epoch, progress.step)
        if (datetime.now(UTC) - first).total_seconds() < self.before_fault:
            return
        if progress.step - start < self.steps_before_fault:
            return
        target = len(run.faults) % status.nodes
        if self.kind == "worker":
            fault = Fault("kill-rank", 0, rank=target * run.job.spec.nproc_per_node)
        elif self.kind == "hang":
            fault = Fault("hang-node", 0, node_rank=target)
        elif self.kind == "hang-rank":
            fault = Fault("hang-rank", 0, rank=target * run.job.spec.nproc_per_node)
        else:
            fault = Fault("kill-node", 0, node_rank=target, lose_node=True)
        record = inject.strike(run.cluster, run.job, fault, datetime.now(UTC))
        if record is None:
            return
        run.faults.append(record)
        self.last_epoch = status.epoch
        if self.kind not in ("worker", "hang", "hang-rank"):  # a lost machine returns
            self.restore_at = time.monotonic() + (0.0 if self.kind == "spare" else 5.0)


def phalanx_scenario(
    kind: str, failures: int, workdir: Path, *, large: bool = False, sharding: str = "ddp"
) -> list[Recovery]:
    spares = 1 if kind == "spare" else 0
    spec = job(1_000_000, spares, large=large, sharding=sharding)
    run = LocalRun(spec, RunOptions(workdir=workdir, fresh=True))
    wait = LARGE_SECONDS_BEFORE_FAULT if large else TRAIN_SECONDS_BEFORE_FAULT
    run.run(
        Injector(failures, kind, spares, before_fault=wait, steps_before_fault=12 if large else 0)
    )
    records = log_records(workdir)
    events = run.executor.events
    recoveries = []
    for index, fault in enumerate(run.faults):
        struck = fault.time.timestamp()
        after = [r for r in records if "loss" in r and r["epoch"] > fault.epoch]
        if not after:
            continue
        first = after[0]
        startup = next(
            (r for r in records if r.get("event") == "startup" and r["epoch"] == first["epoch"]),
            None,
        )
        until = run.faults[index + 1].time if index + 1 < len(run.faults) else None
        restarts = sum(
            1
            for e in events
            if e.reason in ("Restart", "Shrink") and e.time is not None  # a run's events have one
            and e.time >= fault.time and (until is None or e.time < until)
        )  # fmt: skip
        resumed = next((r for r in records if r.get("event") == "resume" and r["time"] > struck),
                       {})  # fmt: skip
        recoveries.append(Recovery(first["time"] - struck, _parts(struck, startup), restarts,
                                   resumed.get("source")))  # fmt: skip
    return recoveries


PARTS = ("detect+assign", "start", "rendezvous", "build", "load", "first step")
"""Each part ends at the stage of the same position in STAGES."""


def _parts(struck: float, startup: dict[str, Any] | None) -> dict[str, float]:
    """Fault -> each start-up stage of the new epoch's rank 0, as durations."""
    if startup is None or any(startup.get(stage) is None for stage in STAGES):
        return {}
    times = [struck, *(float(startup[stage]) for stage in STAGES)]
    return {name: round(times[i + 1] - times[i], 3) for i, name in enumerate(PARTS)}


def torchrun_baseline(failures: int, workdir: Path, *, large: bool = False) -> list[Recovery]:
    """The same trainer under stock torchrun, one worker SIGKILLed per cycle."""
    spec = job(1_000_000, large=large)
    agent = torchrun.start(spec, workdir, max_restarts=failures + 5)
    kills: list[float] = []
    try:
        while len(kills) < failures and agent.poll() is None:
            time.sleep(0.1)
            steps = steps_of(workdir)
            since = kills[-1] if kills else 0.0
            trained = [r["time"] for r in steps if r["time"] > since]
            wait = LARGE_SECONDS_BEFORE_FAULT if large else TRAIN_SECONDS_BEFORE_FAULT
            if not trained or time.time() - trained[0] < wait:
                continue
            worker = torchrun.worker(agent.pid, rank=len(kills) % torchrun.ranks(spec))
            if worker is not None:
                kills.append(time.time())
                worker.kill()
        deadline = time.time() + 300
        while time.time() < deadline and not any(r["time"] > kills[-1] for r in steps_of(workdir)):
            time.sleep(0.2)
    finally:
        torchrun.stop(agent)
    records = log_records(workdir)
    recoveries = []
    for kill in kills:
        # A step logged just after the kill was in flight on the survivors: the recovery ends at
        # the first step of the group torchrun restarted (its trainer logs a resume first).
        resume = min((r for r in records if r.get("event") == "resume" and r["time"] > kill),
                     key=lambda r: r["time"], default=None)  # fmt: skip
        restarted = resume["time"] if resume is not None else None
        after = [r["time"] for r in records
                 if "loss" in r and restarted is not None and r["time"] > restarted]  # fmt: skip
        if after and resume is not None:
            recoveries.append(Recovery(min(after) - kill, source=resume.get("source")))
    return recoveries


def _row(name: str, recoveries: list[Recovery]) -> str:
    values = [r.seconds for r in recoveries]
    if not values:
        return f"| {name} | 0 | - | - | - |"
    tail = stats.tail(values)
    return (
        f"| {name} | {len(values)} | {stats.median(values):.2f} s "
        f"| {tail.label}: {tail.value:.2f} s | {min(values):.2f} s |"
    )


def median_parts(recoveries: list[Recovery]) -> dict[str, float]:
    """Each start-up part's median over the recoveries that have their parts; {} if none."""
    parts = [r.parts for r in recoveries if r.parts]
    return {n: statistics.median(p.get(n, 0.0) for p in parts) for n in PARTS} if parts else {}


def _breakdown(recoveries: list[Recovery]) -> str:
    medians = median_parts(recoveries)
    return ", ".join(f"{n} {v:.2f}" for n, v in medians.items()) if medians else "-"


def figures(results: dict[str, list[Recovery]]) -> dict[str, Any]:
    """Each scenario's recoveries for the suite's report: seconds, the median, median parts (the
    report takes its tail from the seconds)."""
    out: dict[str, Any] = {}
    for key, recoveries in results.items():
        values = [r.seconds for r in recoveries]
        out[key] = {
            "what": SCENARIOS[key][0], "seconds": values,
            "p50": stats.median(values) if values else None,
            "parts": median_parts(recoveries),
            "restarts": sorted({r.restarts for r in recoveries}),
            "sources": [r.source for r in recoveries],
            "baseline": BASELINES.get(key),
        }  # fmt: skip
    return {"scenarios": out}


SCENARIOS: dict[str, tuple[str, Callable[[int, Path], list[Recovery]]]] = {
    "worker": ("a worker SIGKILLed (pod survives)", lambda n, d: phalanx_scenario("worker", n, d)),
    "spare": ("a node lost, hot spare", lambda n, d: phalanx_scenario("spare", n, d)),
    "shrink": ("a node lost, no spare (shrink)", lambda n, d: phalanx_scenario("shrink", n, d)),
    "torchrun": ("torchrun --max-restarts: a worker SIGKILLed", torchrun_baseline),
    "worker-large": (
        f"{LARGE}: a worker SIGKILLed (pod survives)",
        lambda n, d: phalanx_scenario("worker", n, d, large=True),
    ),
    "node-large-fsdp": (
        f"{LARGE}, FSDP: a node lost, hot spare",
        lambda n, d: phalanx_scenario("spare", n, d, large=True, sharding="fsdp"),
    ),
    "torchrun-large": (
        f"{LARGE}: torchrun --max-restarts, a worker SIGKILLed",
        lambda n, d: torchrun_baseline(n, d, large=True),
    ),
}
BASELINES = {"worker": "torchrun", "spare": "torchrun", "shrink": "torchrun",
             "worker-large": "torchrun-large"}  # fmt: skip
"""Each scenario's baseline in the same run: the same trainer and model under torchrun."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument("--large-failures", type=int, default=5,
                        help="failures of the 117.5 M-parameter scenarios (seconds each)")  # fmt: skip
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument(
        "--only", default="worker,spare,shrink,torchrun,snapshot,nofail,goodput,sparse"
    )
    parser.add_argument("--sparse-minutes", type=float, default=10,
                        help="the run with a single failure, in its middle")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench/results/recovery.md"))
    parser.add_argument("--json", type=Path, help="also write the recoveries here, as JSON")
    args = parser.parse_args()
    chosen = args.only.split(",")
    results: dict[str, list[Recovery]] = {}
    goodputs: list[tuple[str, dict[str, float]]] = []
    snapshots: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, (_, scenario) in SCENARIOS.items():
            if key in chosen:
                failures = args.large_failures if "-large" in key else args.failures
                results[key] = scenario(failures, Path(tmp, key))
                print(key, [round(r.seconds, 2) for r in results[key]], flush=True)
        if "snapshot" in chosen:
            snapshots = snapshot_cost(Path(tmp, "snapshot"))
            print("snapshot", snapshots, flush=True)
        if "nofail" in chosen:
            wall = args.sparse_minutes * 60
            goodputs.append(
                (f"none in {args.sparse_minutes:g} min", goodput(wall, 2 * wall, Path(tmp, "g0")))
            )
            print(goodputs[-1], flush=True)
        if "goodput" in chosen:
            wall = args.minutes * 60
            goodputs.append(
                (
                    f"node lost every 60 s for {args.minutes:g} min",
                    goodput(wall, 60, Path(tmp, "g60")),
                )
            )
            print(goodputs[-1], flush=True)
        if "sparse" in chosen:
            sparse = args.sparse_minutes * 60
            goodputs.append(
                (
                    f"one node lost in {args.sparse_minutes:g} min (at its middle)",
                    goodput(sparse, sparse / 2, Path(tmp, "g-sparse")),
                )
            )
            print(goodputs[-1], flush=True)
    machine = (
        f"{platform.node()}: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}"
    )
    lines = [
        "# Recovery on the local backend",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {machine}; no GPU (gloo on CPU), one run of "
        "`python -m bench.recovery.recovery`, every scenario back to back.",
        "Job: deploy/examples/quickstart.yaml (4 nodes x 1 process, the reference trainer, "
        "checkpoint every 20 steps, async, 0.1 s step delay).",
        "",
        "## Time to recover: the fault -> the first training step of the new epoch",
        "",
        "| scenario | failures | p50 | tail | min |",
        "| --- | --- | --- | --- | --- |",
        *(_row(SCENARIOS[k][0], v) for k, v in results.items()),
        "",
    ]
    if "torchrun" in results and "worker" in results and results["torchrun"] and results["worker"]:
        ours = stats.median([r.seconds for r in results["worker"]])
        theirs = stats.median([r.seconds for r in results["torchrun"]])
        lines += [f"Worker kill, p50: torchrun / Phalanx = {theirs / ours:.1f}x.", ""]
    lines += [
        "Where the seconds go (medians; stages of the new epoch's rank 0, from the fault on):",
        "",
    ]
    lines += [
        f"- {SCENARIOS[k][0]}: {_breakdown(v)}"
        for k, v in results.items()
        if not k.startswith("torchrun")
    ]
    if "shrink" in results:
        counts = sorted({r.restarts for r in results["shrink"]})
        lines += ["", f"Restart events per lost node without a spare: {counts}."]
    if goodputs:
        lines += [
            "",
            "## Goodput (spares: 1; each lost machine returns 5 s later)",
            "",
            "| failures | wall | planner goodput | kept steps | steady step time | measured goodput "
            "| measured, without the run's start-up and end |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, g in goodputs:
            lines.append(
                f"| {name}: {g['failures']:.0f} | {g['wall']:.0f} s | {g['planner_goodput']:.1%} "
                f"| {g['kept_steps']:.0f} | {g['step_time'] * 1000:.0f} ms "
                f"| {g['measured_goodput']:.1%} | {g['steady_goodput']:.1%} |"
            )
        lines += ["", "Where the wall time that is not kept training went (seconds):", ""]
        lines += [
            f"- {name}: first start-up {g['lost_start']:.1f}, recoveries {g['lost_recovery']:.1f}, "
            f"redone steps {g['lost_redone']:.1f}, steps slower than the median (checkpoint "
            f"saves, load spikes) {g['lost_slow_steps']:.1f}, the end (final checkpoint, stop) "
            f"{g['lost_end']:.1f}"
            for name, g in goodputs
        ]
        lines += [
            "",
            "Measured goodput = kept steps x the median step time of uninterrupted steps / wall "
            "time (the first epoch's start-up counts as lost too). Planner goodput = the job's "
            "status.goodput (1 - lost / wall; lost = recovery time + work since the last "
            "checkpoint).",
        ]
        baseline = next((g for name, g in goodputs if g["failures"] == 0), None)
        if baseline is not None:
            lines += ["", "Against the run without failures (kept steps per wall second):", ""]
            lines += [
                f"- {name}: {(g['kept_steps'] / g['wall']) / (baseline['kept_steps'] / baseline['wall']):.1%}"
                for name, g in goodputs
                if g is not baseline
            ]
    if snapshots:
        lines += [
            "",
            "## What memory snapshots cost",
            "",
            "Mean step time of the job uninterrupted, 300 steps, by "
            "`checkpoint.memoryIntervalSteps`: "
            + ", ".join(
                f"{k or 'off'}: {v * 1000:.1f} ms ({v / snapshots[0] - 1:+.1%})"
                for k, v in snapshots.items()
            )
            + ".",
        ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(figures(results), indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
