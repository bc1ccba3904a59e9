"""`python -m bench [--quick | --full]`: every benchmark, one after another, each in its own
process with a time limit, their figures in one JSON, and the report (`docs/benchmarks.md`).

Why one process per benchmark: each starts what it measures (an API server, torch process
groups, trainers) and must leave nothing behind for the next; a benchmark that overruns its limit
is stopped and named in the report rather than holding up the rest. `--quick` is for a few
minutes, to see that everything runs; `--full` gives the published figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

from bench import report

ROOT = Path(__file__).resolve().parents[1]
K8S_VERSION = os.environ.get("PHALANX_K8S_VERSION", "v1.33.13")
"""The API server the control-plane benchmark runs (tests/tools/k8s-binaries.sh's pin)."""

PROFILE = "bench/results/suite/operator-profile.raw"
"""Where the full mode's profile of the operator goes (py-spy, collapsed stacks): from a pass of
its own at 300 jobs, since the sampler's CPU would slow a measured pass on 2 cores."""

RECOVERY = "worker,spare,shrink,torchrun,worker-large,node-large-fsdp,torchrun-large"
"""The recovery benchmark's time-to-recover scenarios (its long goodput runs are the intervals
benchmark's business here), the 117.5 M-parameter FSDP node lost among them, so that its ratio to
the DDP worker kill has both sides in the suite's run."""

MODULES = {
    "checkpoint": "bench.snapshot.checkpoint",
    "snapshot": "bench.snapshot.snapshot",
    "controlplane": "bench.controlplane.controlplane",
    "large_job": "bench.controlplane.large_job",
    "api": "bench.api.api",
    "detection": "bench.recovery.detection",
    "recovery": "bench.recovery.recovery",
    "intervals": "bench.recovery.intervals",
}
"""Each benchmark's module, in its family's package (`python -m` runs it alone too)."""

MODES: dict[str, dict[str, tuple[list[str], int]]] = {
    # benchmark -> (its arguments, its time limit in seconds)
    "quick": {
        "checkpoint": (["--sizes", "small", "--repeats", "1"], 600),
        "snapshot": (["--sizes", "toy", "--repeats", "1", "--steps", "10"], 600),
        "controlplane": (["--jobs", "10,20", "--storm", "5", "--baselines", "--agents"], 600),
        "large_job": (["--pods", "200"], 600),
        "api": (["--jobs", "200", "--requests", "10", "--rounds", "2", "--warmup", "5"], 600),
        "detection": (["--faults", "2", "--nodes", "2"], 600),
        "recovery": (["--failures", "2", "--large-failures", "1", "--only", RECOVERY], 900),
        "intervals": (
            [
                "--intervals",
                "10,20",
                "--node-intervals",
                "20",
                "--seconds",
                "40",
                "--baseline-seconds",
                "30",
                "--repeats",
                "1",
                "--derive",
                "600",
            ],
            900,
        ),
    },
    # The full mode fits a working session on 2 cores (115 minutes measured at 0cb77aa, 53 of
    # them the intervals): three repeats of every goodput figure, the 300 s and 600 s intervals
    # derived from the measured terms rather than run three times.
    "full": {
        "checkpoint": (["--sizes", "small,large", "--repeats", "3"], 1200),
        "snapshot": (["--sizes", "toy,large", "--repeats", "3", "--steps", "30"], 1800),
        "controlplane": (
            [
                "--jobs",
                "100,300,1000",
                "--storm",
                "100",
                "--profile",
                PROFILE,
                "--profile-jobs",
                "300",
                "--baselines",
                "--agents",
            ],
            3600,
        ),
        "large_job": (["--pods", "2000"], 900),
        "api": (["--jobs", "1000", "--rounds", "5"], 1800),
        "detection": (["--faults", "5", "--nodes", "5"], 1200),
        "recovery": (["--failures", "10", "--large-failures", "5", "--only", RECOVERY], 2400),
        "intervals": (
            [
                "--intervals",
                "30,60",
                "--node-intervals",
                "60",
                "--seconds",
                "90",
                "--baseline-seconds",
                "60",
                "--repeats",
                "3",
                "--derive",
                "300,600",
                "--large-seconds",
                "150",
            ],
            2 * 3600,
        ),
    },
}


def _machine() -> str:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    kib = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    return (
        f"{platform.node()} ({os.cpu_count()} CPUs, {kib / 2**20:.1f} GiB, "
        f"{platform.machine()}, {platform.system()} {platform.release()}; no GPU: gloo on CPU)"
    )


def _commit() -> str:
    """The commit measured; `-dirty` when the tree had changes beside it."""
    done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout.strip() or "unknown"


def _runs(about: dict[str, Any]) -> dict[str, Any]:
    """A results file's provenance as a list of runs: the first is the one that measured every
    benchmark not named by a later one (`benchmarks`)."""
    return {**about, "runs": about.get("runs") or []}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", dest="mode", const="quick")
    mode.add_argument("--full", action="store_const", dest="mode", const="full")
    parser.add_argument("--only", help="comma-separated benchmarks (default: all of the mode)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results/suite/bench.json")
    parser.add_argument("--report", type=Path, default=ROOT / "docs/benchmarks.md")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md",
                        help="whose bench-table section the run rewrites")  # fmt: skip
    args = parser.parse_args()
    chosen = args.mode or "quick"
    plan = MODES[chosen]
    names = args.only.split(",") if args.only else list(plan)
    unknown = sorted(set(names) - set(plan))
    if unknown:
        parser.error(f"--only: no benchmark {', '.join(unknown)} (there are: {', '.join(plan)})")
    measured = _commit()  # before the run writes its own (tracked) outputs
    results: dict[str, object] = {}
    timings: dict[str, float] = {}
    failed: dict[str, str] = {}
    if args.only and args.results.exists():  # re-measure some: the others stay, with their run
        results = json.loads(args.results.read_text())
        results["about"] = _runs(results["about"])
    args.results.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        arguments, limit = plan[name]
        out = args.results.with_name(f"{name}.json")
        command = [sys.executable, "-m", MODULES[name], *arguments, "--json", str(out)]
        if name not in ("intervals", "detection"):
            command += ["--out", str(args.results.with_name(f"{name}.md"))]
        print(f"::: {name}: {' '.join(command[1:])} (limit {limit} s)", flush=True)
        started = time.monotonic()
        try:
            subprocess.run(command, cwd=ROOT, check=True, timeout=limit)
            results[name] = json.loads(out.read_text())
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as error:
            # The others still run; what this one wrote before it stopped is kept, marked so.
            stopped = (f"ran past its {limit} s limit and was stopped"
                       if isinstance(error, subprocess.TimeoutExpired)
                       else f"failed with exit status {error.returncode}")  # fmt: skip
            print(f"::: {name} {stopped}", flush=True)
            if out.exists() and out.stat().st_mtime >= time.time() - (time.monotonic() - started):
                results[name] = json.loads(out.read_text()) | {"stopped": stopped}
            else:
                failed[name] = stopped
                continue  # an earlier run's figures, if any, stay with that run's provenance
        timings[name] = round(time.monotonic() - started, 1)
    about = {
        "command": f"python -m bench --{chosen}" + (f" --only {args.only}" if args.only else ""),
        "mode": chosen,
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": _machine(),
        "versions": f"Phalanx {measured}, Python {platform.python_version()}, "
        f"torch {version('torch')}, kube-apiserver {K8S_VERSION}",
        "seconds": timings,
    }
    if isinstance(results.get("about"), dict) and args.only:
        earlier = cast(dict[str, Any], results["about"])
        runs = earlier["runs"] + [{**about, "benchmarks": list(timings), "failed": failed}]
        about = {**earlier, "runs": runs, "seconds": {**earlier["seconds"], **timings}}
    results["about"] = about
    args.results.write_text(json.dumps(results, indent=1))
    report.publish(results, args.report, args.readme)
    print(f"::: figures in {args.results}, report in {args.report}; seconds: {timings}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
