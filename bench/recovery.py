"""Recovery on the local backend: how long a gang takes to train again after a node is SIGKILLed,
and how much of the wall time is kept when a node fails every 60 s.

Part 1, time to recover: the quickstart job (4 nodes x 1 process, CPU) runs; each time the
current epoch has trained for a few seconds, one node's agent and workers are SIGKILLed (node
ranks in turn, rank 0 included; the machine stays, as after a reboot). Time to recover = the
kill -> the first training step of the new epoch (the trainer's own step log), so it covers
detection, the survivors' exit, the new gang's start-up, rendezvous, the checkpoint load and one
step. p50 and p99 over N failures.

Part 2, goodput: the same job for M minutes with a node SIGKILLed every 60 s. Reported twice:
the planner's own goodput (status.goodput: 1 - lost / wall, lost = recovery + work since the
checkpoint), and measured from the step log: kept steps x the steady step time / wall time.

Usage: python -m bench.recovery [--failures 20] [--minutes 10] [--out bench/results/recovery.md]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from phalanx.local import Fault, FaultPlan, LocalRun, RunOptions, inject
from phalanx.models import TrainingJob

QUICKSTART = Path(__file__).resolve().parents[1] / "deploy" / "examples" / "quickstart.yaml"
TRAIN_SECONDS_BEFORE_KILL = 5.0


def job(steps: int) -> TrainingJob:
    manifest = yaml.safe_load(QUICKSTART.read_text())
    manifest["spec"]["trainer"]["steps"] = steps
    manifest["spec"]["failurePolicy"]["maxInfraRestarts"] = 1000
    return TrainingJob.from_manifest(manifest)


def steps_of(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "log" / "losses.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if "loss" in r]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Killer:
    """Kills a node each time the current epoch has trained a while; stops after `failures`
    once the gang trains again."""

    failures: int
    first_step: dict[int, datetime] = field(default_factory=dict)
    last_killed_epoch: int = 0

    def __call__(self, run: LocalRun) -> None:
        status, progress = run.status, run.status.progress
        if status.phase != "Running" or progress is None or progress.epoch != status.epoch:
            return
        if status.epoch <= self.last_killed_epoch or progress.updated_at is None:
            return  # the killed epoch, or the next one has not trained yet
        if len(run.faults) >= self.failures:
            if run.stop_requests == 0:
                run.request_stop()
            return
        first = self.first_step.setdefault(status.epoch, progress.updated_at)
        if (datetime.now(UTC) - first).total_seconds() < TRAIN_SECONDS_BEFORE_KILL:
            return
        node = len(run.faults) % status.nodes
        fault = Fault("kill-node", 0, node_rank=node, lose_node=False)
        record = inject.strike(run.cluster, run.job, fault, datetime.now(UTC))
        if record is None:
            return
        run.faults.append(record)
        self.last_killed_epoch = status.epoch


def time_to_recover(failures: int, workdir: Path) -> list[float]:
    """Kill -> first step of the next epoch, for each of `failures` node kills."""
    run = LocalRun(job(1_000_000), RunOptions(workdir=workdir, fresh=True))
    run.run(Killer(failures))
    records = steps_of(workdir)
    recoveries = []
    for fault in run.faults:
        after = [r["time"] for r in records if r["epoch"] > fault.epoch]
        if after:
            recoveries.append(min(after) - fault.time.timestamp())
    return recoveries


def goodput(minutes: float, workdir: Path) -> dict[str, float]:
    """A node SIGKILLed every 60 s for `minutes`; then Ctrl-C (suspend)."""
    wall = minutes * 60
    kills = [Fault("kill-node", t, node_rank=i % 4, lose_node=False)
             for i, t in enumerate(range(60, int(wall), 60))]  # fmt: skip
    run = LocalRun(job(1_000_000), RunOptions(workdir=workdir, fresh=True, faults=FaultPlan(kills)))

    def on_tick(r: LocalRun) -> None:
        if r.elapsed >= wall and r.stop_requests == 0:
            r.request_stop()

    summary = run.run(on_tick)
    records = steps_of(workdir)
    kept: dict[int, float] = {}
    for record in records:  # a resumed step replaces the lost one
        kept[record["step"]] = record["time"]
    intervals = [b["time"] - a["time"] for a, b in itertools.pairwise(records)
                 if b["epoch"] == a["epoch"] and b["step"] == a["step"] + 1]  # fmt: skip
    step_time = statistics.median(intervals)
    return {
        "failures": len(run.faults),
        "wall": summary.duration_seconds,
        "planner_goodput": summary.goodput or 0.0,
        "kept_steps": len(kept),
        "step_time": step_time,
        "measured_goodput": len(kept) * step_time / summary.duration_seconds,
        "recoveries": statistics.median(summary.recoveries) if summary.recoveries else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench/results/recovery.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        recoveries = time_to_recover(args.failures, Path(tmp, "recover"))
        print("time to recover:", [round(r, 2) for r in recoveries], flush=True)
        result = goodput(args.minutes, Path(tmp, "goodput"))
        print("goodput:", result, flush=True)
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    lines = [
        "# Recovery on the local backend",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {machine}; no GPU (gloo on CPU).",
        "Job: deploy/examples/quickstart.yaml (4 nodes x 1 process, the reference trainer, "
        "checkpoint every 20 steps, async), `python -m bench.recovery`.",
        "",
        f"## Time to recover from a SIGKILLed node ({len(recoveries)} failures)",
        "",
        "Kill of one node's agent and workers -> the first training step of the new epoch.",
        "",
        "| p50 | p99 | min | max |",
        "| --- | --- | --- | --- |",
        f"| {percentile(recoveries, 0.5):.1f} s | {percentile(recoveries, 0.99):.1f} s "
        f"| {min(recoveries):.1f} s | {max(recoveries):.1f} s |",
        "",
        f"## Goodput with a node SIGKILLed every 60 s for {args.minutes:g} minutes",
        "",
        "| failures | wall | planner goodput | kept steps | steady step time | measured goodput |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {result['failures']:.0f} | {result['wall']:.0f} s | {result['planner_goodput']:.1%} "
        f"| {result['kept_steps']:.0f} | {result['step_time'] * 1000:.0f} ms "
        f"| {result['measured_goodput']:.1%} |",
        "",
        "Measured goodput = kept steps x the median step time of uninterrupted steps / wall time "
        "(start-up of the first epoch counts as lost too). Planner goodput = the job's "
        "status.goodput (1 - lost / wall; lost = recovery time + work since the last checkpoint).",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
