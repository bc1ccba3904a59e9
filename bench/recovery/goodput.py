"""Goodput runs and the cost of memory snapshots, for `bench.recovery.recovery`: the quickstart job for
minutes with failures at a given interval (or none, the baseline), measured from its step log.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from phalanx.local import Fault, FaultPlan, LocalRun, RunOptions
from phalanx.models import TrainingJob

QUICKSTART = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "quickstart.yaml"


LARGE_MODEL = ["--vocab", "8192", "--seq-len", "64", "--dim", "1024", "--heads", "8",
               "--layers", "8", "--hidden", "4096"]  # fmt: skip
"""The reference trainer's model at 117.5 M parameters, with real compute (no emulated delay):
about 1.3 s a step on one core of this machine (forward, backward, AdamW), beside the toy."""


def job(
    steps: int,
    spares: int = 0,
    memory_interval_steps: int | None = None,
    *,
    large: bool = False,
    sharding: str = "ddp",
) -> TrainingJob:
    """The quickstart; `large`: the same job with the 117.5 M-parameter model and real compute
    on 2 nodes (one core each here), a global batch of 2 sequences."""
    manifest = yaml.safe_load(QUICKSTART.read_text())
    manifest["spec"]["trainer"]["steps"] = steps
    manifest["spec"]["failurePolicy"]["maxInfraRestarts"] = 1000
    manifest["spec"]["spares"] = spares
    manifest["spec"]["trainer"]["sharding"] = sharding
    if memory_interval_steps is not None:  # exactly this cadence: no overhead budget
        manifest["spec"]["checkpoint"]["memoryIntervalSteps"] = memory_interval_steps
        manifest["spec"]["checkpoint"]["memoryOverheadPercent"] = 0
    if large:
        manifest["spec"]["replicas"] = {"min": 1, "max": 2}
        manifest["spec"]["trainer"]["globalBatchSize"] = 2
        manifest["spec"]["failurePolicy"].pop("hangTimeoutSeconds", None)  # steps of seconds
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        container["args"] = ["python", "-m", "phalanx.trainer.train", *LARGE_MODEL]
    return TrainingJob.from_manifest(manifest)


def log_records(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "log" / "losses.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def steps_of(workdir: Path) -> list[dict[str, Any]]:
    return [r for r in log_records(workdir) if "loss" in r]


SNAPSHOT_INTERVALS = (0, 1, 10)


def snapshot_cost(workdir: Path, steps: int = 300) -> dict[int, float]:
    """What memory snapshots cost a step: the median step time of uninterrupted runs of the
    job without them, with one every step, and with one every 10 steps, back to back."""
    medians = {}
    for interval in SNAPSHOT_INTERVALS:
        directory = workdir / f"memory-{interval}"
        LocalRun(job(steps, memory_interval_steps=interval),
                 RunOptions(workdir=directory, fresh=True)).run()  # fmt: skip
        records = steps_of(directory)
        intervals = [b["time"] - a["time"] for a, b in itertools.pairwise(records)]
        medians[interval] = statistics.mean(intervals)  # a snapshot every 10 steps: no median
    return medians


def goodput(seconds: float, every: float, workdir: Path) -> dict[str, float]:
    """Nodes lost every `every` s for `seconds` (each machine back 5 s later); then Ctrl-C.
    `every` past `seconds`: no failure (the baseline the other runs are compared with)."""
    kills = [Fault("kill-node", t, node_rank=i % 4, lose_node=True)
             for i, t in enumerate(range(int(every), int(seconds), int(every)))]  # fmt: skip
    options = RunOptions(workdir=workdir, fresh=True, faults=FaultPlan(kills))
    run = LocalRun(job(1_000_000, spares=1), options)
    restore: list[float] = []

    def on_tick(r: LocalRun) -> None:
        if len(r.faults) > len(restore):
            restore.append(time.monotonic() + 5.0)
        if restore and time.monotonic() >= restore[-1] > 0:
            r.cluster.set_capacity(r.job.spec.desired_nodes + 1)
            restore[-1] = -1.0
        if r.elapsed >= seconds and r.stop_requests == 0:
            r.request_stop()

    summary = run.run(on_tick)
    records = steps_of(workdir)
    kept = {r["step"] for r in records}  # a redone step replaces the lost one
    intervals = [b["time"] - a["time"] for a, b in itertools.pairwise(records)
                 if b["epoch"] == a["epoch"] and b["step"] == a["step"] + 1]  # fmt: skip
    step_time = statistics.median(intervals)
    first = summary.events[0].time if summary.events else None  # a run's events have their time
    started = first.timestamp() if first else records[0]["time"]
    recoveries = [
        min((r["time"] for r in records if r["epoch"] > f.epoch), default=f.time.timestamp())
        - f.time.timestamp()
        for f in run.faults
    ]
    return {
        "failures": len(run.faults),
        "wall": summary.duration_seconds,
        "planner_goodput": summary.goodput or 0.0,
        "kept_steps": len(kept),
        "step_time": step_time,
        "measured_goodput": len(kept) * step_time / summary.duration_seconds,
        # where the rest went, in seconds
        "lost_start": records[0]["time"] - started,
        "lost_recovery": sum(recoveries),
        "lost_redone": (len(records) - len(kept)) * step_time,
        "lost_slow_steps": sum(i - step_time for i in intervals if i > step_time),
        "lost_end": started + summary.duration_seconds - records[-1]["time"],
    } | _steady(len(kept) * step_time, summary.duration_seconds, records[0]["time"] - started,
                started + summary.duration_seconds - records[-1]["time"])  # fmt: skip


def _steady(kept: float, wall: float, start: float, end: float) -> dict[str, float]:
    """Goodput without the run's own start-up and end, which no failure caused."""
    return {"steady_goodput": kept / (wall - start - end)}
