"""Goodput against the failure interval: Phalanx and stock torchrun, the same script, the same
checkpoint cadence, the same fault (one worker SIGKILLed every M seconds), back to back, each
run repeated (`--repeats`, 3 in the full suite) so that every figure has a spread; and Phalanx
with a node lost every M seconds (`--node-intervals`; a hot spare, the machine back 5 s later),
which torchrun on one agent has no like-for-like for.

Intervals too long to run three times in a session (`--derive`, 600 s in the full suite) are
derived, not run: each repeat's goodput without failures less the time a failure cost in that
repeat's runs (measured: (G0 - G) x window / failures, the median over its intervals) divided
by M. The report labels them so.

Why these two: torchrun's `--max-restarts` is what a PyTorch user has without an orchestrator;
it is given its best chance (`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`, c10d rendezvous on one
agent, a 0.1 s monitor interval) and the same checkpoint every `intervalSteps` steps. Phalanx runs
the quickstart job on the local backend: the killed worker's pod survives, the gang restarts in
place and resumes from the ranks' memory snapshots.

Goodput = steps kept x the run's median uninterrupted step time / the time from the first
training step to the end of the window: the start-up a run without failures pays too is left
out. Beside each system's figures, the first-order bound 1 - C/tau - (R + tau/2)/M: C/tau is the
share of step time its saves block (measured in its run without failures: time in steps slower
than the median), tau the time between states it can resume from (Phalanx: a memory snapshot
every `memoryIntervalSteps`; torchrun: a checkpoint every `intervalSteps`), R its median measured
recovery (the kill to the first step after it), M the failure interval.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.recovery import torchrun as baseline
from bench.recovery.goodput import job, log_records
from phalanx.local import Fault, LocalRun, RunOptions, inject
from phalanx.models import TrainingJob

STEP_KINDS = ("the first after a checkpoint", "after a checkpoint", "the first after a snapshot",
              "after a snapshot", "the others")  # fmt: skip


def step_kind(step: int, checkpoint_every: int, snapshot_every: int, first: set[str]) -> str:
    """Which kind of step `step` is, by what the step before it saved: the first of a kind
    pays one-time costs (host buffers touched for the first time), so it is counted apart."""
    before = step - 1
    if before > 0 and before % checkpoint_every == 0:
        kind = "after a checkpoint"
    elif before > 0 and snapshot_every and before % snapshot_every == 0:
        kind = "after a snapshot"
    else:
        return "the others"
    if kind in first:
        return kind
    first.add(kind)
    return f"the first {kind}"


def time_above_median(steps: list[dict[str, Any]], step_time: float, checkpoint_every: int,
                      snapshot_every: int) -> dict[str, float]:  # fmt: skip
    """Seconds a run's consecutive steps took beyond its median step (`step_time`), by
    `step_kind` (the steps that follow a save, as both systems number them: torchrun's snapshot
    steps save nothing and show what those steps cost without a snapshot)."""
    extra = dict.fromkeys(STEP_KINDS, 0.0)
    first: set[str] = set()
    for a, b in itertools.pairwise(steps):
        if b["step"] == a["step"] + 1:
            kind = step_kind(b["step"], checkpoint_every, snapshot_every, first)
            extra[kind] += b["time"] - a["time"] - step_time
    return extra


CADENCE = job(1).spec.checkpoint
"""Every run's checkpoint and snapshot spacing (the quickstart's, the 117.5 M model's too)."""


@dataclass
class Run:
    """One window of training under one system, with its failures."""

    system: str
    interval: float | None
    """Seconds between failures; None: a run without failures."""
    window: float
    """Seconds from the first training step to the end."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """rank 0's step records: time (from the run's start), step, world size."""
    kills: list[float] = field(default_factory=list)
    """When each failure struck (from the run's start)."""
    failure: str = "worker"
    """What failed: "worker" (one SIGKILLed, its pod survives) or "node" (lost, a spare)."""
    repeat: int = 0

    @property
    def step_time(self) -> float:
        gaps = [b["time"] - a["time"] for a, b in itertools.pairwise(self.steps)
                if b["step"] == a["step"] + 1]  # fmt: skip
        return statistics.median(gaps) if gaps else 0.0

    @property
    def kept(self) -> int:
        return len({s["step"] for s in self.steps})

    @property
    def goodput(self) -> float:
        return self.kept * self.step_time / self.window if self.window > 0 else 0.0

    @property
    def save_share(self) -> float:
        """Share of the window that consecutive steps took beyond the median step time (saves,
        load spikes), net of the steps faster than the median."""
        gaps = [b["time"] - a["time"] for a, b in itertools.pairwise(self.steps)
                if b["step"] == a["step"] + 1]  # fmt: skip
        extra = sum(gaps) - len(gaps) * self.step_time
        return max(0.0, extra) / self.window if self.window > 0 else 0.0

    @property
    def recoveries(self) -> list[float]:
        """Each kill to the first step after the pause it caused."""
        median = self.step_time
        found = []
        for kill in self.kills:
            after = [(a, b) for a, b in itertools.pairwise(self.steps) if b["time"] > kill]
            resumed = next((b for a, b in after if b["time"] - a["time"] > 3 * median), None)
            if resumed is not None:
                found.append(resumed["time"] - kill)
        return found

    def figures(self, *, series: bool = False) -> dict[str, Any]:
        """The run's figures; its per-step series only with `series` (the one run the report
        plots): the series of every run would be most of the results' size and nothing reads it."""
        figures = asdict(self) | {
            "step_time": self.step_time, "kept": self.kept, "goodput": self.goodput,
            "save_share": self.save_share, "recoveries": self.recoveries,
            "first_step": self.steps[0]["time"] if self.steps else None,
            "above_median": time_above_median(self.steps, self.step_time,
                                              CADENCE.interval_steps, CADENCE.memory_interval_steps),
        }  # fmt: skip
        return figures if series else {k: v for k, v in figures.items() if k != "steps"}


def timeline(runs: list[Run]) -> Run | None:
    """The run the report draws step by step: Phalanx's worker kills at the shortest interval
    (the most failures in one window), its first repeat."""
    struck = [r for r in runs if r.system == "phalanx" and r.failure == "worker" and r.interval]
    return min(struck, key=lambda r: (r.interval or 0, r.repeat), default=None)


def _relative(records: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    return [{"time": round(r["time"] - start, 3), "step": r["step"], "world": r.get("world")}
            for r in records if "loss" in r]  # fmt: skip


def _window(system: str, interval: float | None, steps: list[dict[str, Any]], end: float,
            kills: list[float]) -> Run:  # fmt: skip
    """The run from its first step to `end`; steps logged while it was being stopped are not
    in it."""
    inside = [s for s in steps if s["time"] <= end]
    first = inside[0]["time"] if inside else end
    return Run(system, interval, round(end - first, 3), inside, [k for k in kills if k <= end])


def _due(first_step: float | None, now: float, interval: float | None, struck: int) -> bool:
    """Whether failure number `struck + 1` is due: every `interval` s, half an interval after
    the first step and then every interval, so that a window of k intervals holds k failures,
    each with what it costs (the recovery and the redone steps) inside the window."""
    return (
        interval is not None
        and first_step is not None
        and (now - first_step >= interval * (struck + 0.5))
    )


def phalanx(spec: TrainingJob, seconds: float, interval: float | None, workdir: Path,
            failure: str = "worker") -> Run:  # fmt: skip
    """The job on the local backend for `seconds` after its first step, a worker SIGKILLed (or,
    `failure="node"`, a node lost, its machine back 5 s later) every `interval` s from then."""
    run = LocalRun(spec, RunOptions(workdir=workdir, fresh=True))
    started = time.time()
    first: list[float] = []
    restore: list[float] = []

    def on_tick(r: LocalRun) -> None:
        if not first and r.status.progress is not None:
            first.append(time.time())
        now = time.time()
        if restore and now >= restore[0]:
            r.cluster.set_capacity(r.job.spec.desired_nodes + r.job.spec.spares)
            restore.clear()
        if first and now - first[0] >= seconds and r.stop_requests == 0:
            r.request_stop()
        elif _due(first[0] if first else None, now, interval, len(r.faults)):
            if failure == "node":
                fault = Fault("kill-node", 0, node_rank=len(r.faults) % r.status.nodes,
                              lose_node=True)  # fmt: skip
            else:
                fault = Fault("kill-rank", 0, rank=len(r.faults) % baseline.ranks(spec))
            record = inject.strike(r.cluster, r.job, fault, datetime.now(UTC))
            if record is not None:
                r.faults.append(record)
                if failure == "node":
                    restore.append(now + 5.0)

    run.run(on_tick)
    steps = _relative(log_records(workdir), started)
    kills = [round(f.time.timestamp() - started, 3) for f in run.faults]
    end = (first[0] - started + seconds) if first else time.time() - started
    window = _window("phalanx", interval, steps, end, kills)
    window.failure = failure
    return window


def torchrun(spec: TrainingJob, seconds: float, interval: float | None, workdir: Path) -> Run:
    """The same trainer under `torchrun --max-restarts` for `seconds` after its first step, a
    worker SIGKILLed every `interval` s from then."""
    started = time.time()
    agent = baseline.start(spec, workdir, max_restarts=1000)
    kills: list[float] = []
    first: float | None = None
    try:
        while agent.poll() is None:
            now = time.time()
            if first is None:
                trained = [r for r in log_records(workdir) if "loss" in r]
                first = trained[0]["time"] if trained else None
            elif now - first >= seconds:
                break
            due = _due(first, now, interval, len(kills))
            worker = baseline.worker(agent.pid, len(kills) % baseline.ranks(spec)) if due else None
            if worker is not None:
                kills.append(round(time.time() - started, 3))
                worker.kill()
            time.sleep(0.05)
    finally:
        baseline.stop(agent)
    steps = _relative(log_records(workdir), started)
    end = (first - started + seconds) if first is not None else time.time() - started
    return _window("torchrun", interval, steps, end, kills)


SYSTEMS = {"phalanx": phalanx, "torchrun": torchrun}


def resume_spacing(system: str, spec: TrainingJob, step_time: float) -> float:
    """tau: seconds between the states a system resumes from after a worker is killed."""
    checkpoint = spec.spec.checkpoint
    steps = checkpoint.memory_interval_steps if system == "phalanx" else checkpoint.interval_steps
    return (steps or checkpoint.interval_steps) * step_time


def bound(terms: dict[str, float], run: dict[str, Any]) -> float:
    """1 - C/tau - (R + tau/2)/M for a run: saves, then per failure its recovery and half the
    work since the last state it can resume from. M is the run's own failure interval (its
    window over the failures that struck): a kill waits for a worker to exist, so a system that
    recovers slowly is struck less often than the nominal interval."""
    if not run["kills"]:
        return 1.0 - terms["save_share"]
    interval = float(run["window"]) / len(run["kills"])
    return 1.0 - terms["save_share"] - (terms["recovery"] + terms["tau"] / 2) / interval


def _window_for(seconds: float, interval: float) -> float:
    """A whole number of intervals near `seconds`, at least one: the failures strike in the
    middle of each (`_due`), so each one's cost falls inside the window."""
    return interval * max(1, round(seconds / interval))


def measure(intervals: list[float], node_intervals: list[float], seconds: float,
            baseline_seconds: float, repeats: int, derive: list[float],
            workdir: Path, *, large: bool = False,
            large_seconds: float = 0) -> dict[str, Any]:  # fmt: skip
    """`repeats` rounds, each: every system without failures, then at each interval; Phalanx
    with nodes lost at each node interval; with `large_seconds`, every system without failures
    on the 117.5 M-parameter model too (failure "large"). Then the bound's terms and the
    derived intervals."""
    spec, with_spare = job(1_000_000, large=large), job(1_000_000, spares=1, large=large)
    runs: list[Run] = []
    for repeat in range(repeats):
        for system, run in SYSTEMS.items() if large_seconds else ():
            runs.append(run(job(1_000_000, large=True), large_seconds, None,
                            workdir / f"r{repeat}" / f"{system}-large"))  # fmt: skip
            runs[-1].repeat, runs[-1].failure = repeat, "large"
            print(repeat, system, "no failures, 117.5 M", f"{runs[-1].goodput:.3f}", flush=True)
        for system, run in SYSTEMS.items():
            here = workdir / f"r{repeat}"
            runs.append(run(spec, baseline_seconds, None, here / f"{system}-none"))
            runs[-1].repeat = repeat
            print(repeat, system, "no failures", f"{runs[-1].goodput:.3f}", flush=True)
            for interval in intervals:
                window = _window_for(seconds, interval)
                runs.append(run(spec, window, interval, here / f"{system}-{interval:g}"))
                runs[-1].repeat = repeat
                print(repeat, system, interval, f"{runs[-1].goodput:.3f}", runs[-1].recoveries,
                      flush=True)  # fmt: skip
        for interval in node_intervals:
            window = _window_for(seconds, interval)
            runs.append(phalanx(with_spare, window, interval,
                                workdir / f"r{repeat}" / f"node-{interval:g}", failure="node"))  # fmt: skip
            runs[-1].repeat = repeat
            print(repeat, "phalanx, node lost", interval, f"{runs[-1].goodput:.3f}", flush=True)
    bounds = {}
    for system in SYSTEMS:
        mine = [r for r in runs if r.system == system and r.failure == "worker"]  # the toy
        calm = [r for r in mine if r.interval is None]
        recoveries = [s for r in mine for s in r.recoveries]
        bounds[system] = {
            "save_share": statistics.median(r.save_share for r in calm),
            "tau": resume_spacing(system, spec, statistics.median(r.step_time for r in calm)),
            "recovery": statistics.median(recoveries) if recoveries else float("nan"),
        }
    drawn = timeline(runs)
    return {"runs": [r.figures() for r in runs], "bounds": bounds, "repeats": repeats,
            "derived": derived(runs, derive),
            "timeline": drawn.figures(series=True) if drawn else None}  # fmt: skip


def lost_per_failure(runs: list[Run], system: str, repeat: int) -> float | None:
    """Seconds of goodput one worker kill cost in a repeat: (G0 - G) x window / failures over
    its runs with failures (the median), G0 its run without."""
    mine = [r for r in runs if (r.system, r.failure, r.repeat) == (system, "worker", repeat)]
    calm = next((r for r in mine if r.interval is None), None)
    costs = [(calm.goodput - r.goodput) * r.window / len(r.kills)
             for r in mine if calm is not None and r.kills]  # fmt: skip
    return statistics.median(costs) if costs else None


def derived(runs: list[Run], intervals: list[float]) -> dict[str, Any]:
    """Each system's goodput at each of `intervals`, per repeat: G0 - lost per failure / M."""
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        per_repeat = []
        for repeat in sorted({r.repeat for r in runs}):
            calm = next((r for r in runs if (r.system, r.failure, r.repeat, r.interval)
                         == (system, "worker", repeat, None)), None)  # fmt: skip
            lost = lost_per_failure(runs, system, repeat)
            if calm is not None and lost is not None:
                per_repeat.append((calm.goodput, lost))
        out[system] = {
            "lost_per_failure": [lost for _, lost in per_repeat],
            "goodput": {f"{m:g}": [g0 - lost / m for g0, lost in per_repeat] for m in intervals},
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="30,60,120,300,600",
                        help="seconds between failures, comma-separated")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=600,
                        help="each run's length after its first step (at least one interval)")  # fmt: skip
    parser.add_argument("--baseline-seconds", type=float, default=300)
    parser.add_argument("--node-intervals", default="60",
                        help="seconds between lost nodes (Phalanx, a hot spare); '' for none")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3, help="runs of every figure")
    parser.add_argument("--derive", default="600",
                        help="intervals derived from the measured terms, not run; '' for none")  # fmt: skip
    parser.add_argument("--large", action="store_true",
                        help="the 117.5 M-parameter model with real compute (bench.recovery.goodput)")  # fmt: skip
    parser.add_argument("--large-seconds", type=float, default=0,
                        help="each system's run without failures on the 117.5 M-parameter model "
                             "(0: none)")  # fmt: skip
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args()

    def numbers(text: str) -> list[float]:
        return [float(m) for m in text.split(",") if m]

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        figures = measure(numbers(args.intervals), numbers(args.node_intervals), args.seconds,
                          args.baseline_seconds, args.repeats, numbers(args.derive), Path(tmp),
                          large=args.large, large_seconds=args.large_seconds)  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
