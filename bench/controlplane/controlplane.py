"""Control-plane benchmark: N TrainingJobs x M node pods on the real API server, with the real
kube-scheduler placing the pods on kwok's fake nodes and kwok running them, then a failure storm.

The operator runs as its own process (so its CPU and RSS are its own) with an identity of its
own, which the API server's audit log records: every request it makes is counted and timed there.
Measured for each job count, on a fresh API server:

- apply -> all node pods created, apply -> all jobs Running;
- reconcile p50/p99 (the operator's histogram, interpolated as Prometheus' histogram_quantile
  does) and where a reconcile's time goes (queued for a slot before it, plan, execute, of which
  waiting for the API server's answers, and the operator's own time: plan + execute less that);
- the API server's own time for the operator's requests (audit: received -> response), reported
  apart from the reconcile, and the operator's requests per reconcile;
- the operator's CPU seconds and peak RSS, beside the CPU of etcd, the API server, the scheduler
  and kwok (all share this machine's cores);
- a failure storm: nodes lost at once until `--storm` jobs each lost one (a node holds pods of
  several jobs), -> every one of them Running again in a new epoch on other nodes;
- with `--profile`, where the operator's CPU goes (py-spy, 20 samples a second, the process not
  paused), in a pass of its own at `--profile-jobs` jobs: the sampler's CPU, on 2 cores, slowed
  the pass it watched 1.7x (204.1 s to create 8 000 pods profiled, 117.4 s not, at 73dbe2d), so
  no measured pass is profiled and every ratio compares two unprofiled passes;
- with `--baselines`, at the largest count, the same jobs x pods made by the kube Job controller
  and by Kubeflow's training operator, each on a fresh API server (`bench.controlplane.baselines`), and
  Phalanx's times as ratios of theirs.

Usage: python -m bench.controlplane.controlplane [--jobs 200] [--nodes 8] [--storm 100] [--profile op.raw]
                                    [--profile-jobs 300]
                                    [--baselines] [--out bench/results/controlplane.md]
                                    [--json figures.json]

`--jobs` may list several counts (`50,100,200`): the JSON holds one entry per count (latency
against the number of jobs); the Markdown table shows the largest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psutil
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from bench.common.process_stats import cpu_seconds, peak_rss_mib
from bench.common.profile import summarise
from bench.common.stats import quantile
from bench.common.tally import GROUP, PLURAL, VERSION, Tally, start_watches
from bench.controlplane import baselines, kwok
from bench.controlplane.agent_fleet import FAILURE_POLICY, AgentFleet, KeptAliveAPI
from bench.controlplane.audit import (
    AGENTS_TOKEN,
    AUDIT_USER,
    audit_args,
    operator_kubeconfig,
    requests_between,
)
from bench.controlplane.storm import failures, storm_nodes, timeline
from harness.controlplane import (
    ControlPlane,
    binaries_dir,
    free_port,
    running_control_plane,
    wait_until,
)
from harness.jobs import operator_job

NAMESPACE = "bench"
AGENTS_LATE_SECONDS = 3600
"""What the jobs set as failurePolicy.startupTimeoutSeconds. With `--agents` the simulated agents
begin once every job runs (so that their writes are not timed with the creation), minutes after
the first jobs' pods ran: the operator would count those minutes as start-ups stuck past its
120 s floor and restart the jobs as the agents' first reports come in (at 1 000 jobs on a slow
machine, most of them, each restart's acknowledgements queued behind the rest, then more).
Real agents start with their pods, and report within seconds of them."""
PODS_PER_NODE = 8
"""kwok nodes: one per 8 node pods (an 8-GPU machine runs one pod of each of 8 jobs' worth)."""


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets."""
    total = buckets[-1][1] if buckets else 0
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = upper, count
    return lower


def scrape(port: int) -> dict[str, list[tuple[float, float]]]:
    """The operator's reconcile histograms: name (or part) -> cumulative buckets."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found: dict[str, list[tuple[float, float]]] = {}
    for line in text.splitlines():
        if line.startswith("phalanx_reconcile_duration_seconds_bucket"):
            key = "reconcile"
        elif line.startswith("phalanx_reconcile_part_seconds_bucket"):
            key = line.split('part="')[1].split('"')[0]
        else:
            continue
        le = line.split('le="')[1].split('"')[0]
        found.setdefault(key, []).append((float(le), float(line.rsplit(" ", 1)[1])))
    return {key: sorted(buckets) for key, buckets in found.items()}


def difference(after: list[tuple[float, float]], before: list[tuple[float, float]]) -> list[tuple[float, float]]:  # fmt: skip
    """The buckets of what was observed between two scrapes."""
    earlier = dict(before)
    return [(le, count - earlier.get(le, 0.0)) for le, count in after]


def profiler(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` 20 times a second without pausing it, until it exits: collapsed
    stacks in `out` (`python -m bench.common.profile` summarises them)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "20", "--nonblocking",
                             "--format", "raw", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


@dataclass
class Bench:
    """A fresh API server with the audit log, kube-scheduler and kwok nodes, and a tally of the
    bench namespace's node pods and jobs."""

    plane: ControlPlane
    tmp: Path
    api: k8s.ApiClient
    core: k8s.CoreV1Api
    custom: k8s.CustomObjectsApi
    tally: Tally


@contextlib.contextmanager
def kwok_bench(pods: int) -> Iterator[Bench]:
    """The cluster for `pods` node pods (kwok nodes of `PODS_PER_NODE`, one more node's worth
    spare), until the block ends."""
    with tempfile.TemporaryDirectory() as tmp, \
         running_control_plane(Path(tmp), audit_args(Path(tmp))) as plane:  # fmt: skip
        api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
        core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
        with kwok.scheduler_and_kwok(plane, Path(tmp)):
            kwok.add_nodes(core, -(-pods // PODS_PER_NODE) + PODS_PER_NODE)
            tally = Tally()
            start_watches(api, NAMESPACE, tally, "phalanx.dev/role=node")
            yield Bench(plane, Path(tmp), api, core, custom, tally)


def measure(jobs: int, nodes: int, storm: int, profile: Path | None = None,
            agents: bool = False) -> dict[str, Any]:  # fmt: skip
    """`jobs` TrainingJobs of `nodes` node pods each, on a fresh API server: the figures (with
    `agents`, simulated agents report for every pod once all jobs run: the storm's survivors
    then restart in place, as the agent's pods do on a cluster)."""
    with kwok_bench(jobs * nodes) as b:
        return _run(b.plane, b.tmp, b.core, b.custom, b.tally, jobs, nodes, storm, profile,
                    agents)  # fmt: skip


def job_spec(nodes: int) -> dict[str, Any]:
    """The spec of the bench's TrainingJobs (and of the pods of the Job controller's
    like-for-like pass, `baselines.phalanx_template`)."""
    return {"replicas": {"min": nodes, "max": nodes}, "nprocPerNode": 1,
            "failurePolicy": {**FAILURE_POLICY, "startupTimeoutSeconds": AGENTS_LATE_SECONDS}}  # fmt: skip


def _run(plane: ControlPlane, tmp: Path, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi,
         tally: Tally, jobs: int, nodes: int, storm: int, profile: Path | None,
         agents: bool = False) -> dict[str, Any]:  # fmt: skip
    operator, port = start_operator(plane, tmp)
    fleet: AgentFleet | None = None
    agents_settled = None
    spy = profiler(operator.pid, profile) if profile is not None else None
    others = {"etcd": plane.pids[0], "kube-apiserver": plane.pids[1],
              "kube-controller-manager": plane.pids[2]} | {
        p.name(): p.pid for p in psutil.Process().children() if p.name() in ("kube-scheduler", "kwok")
    }  # fmt: skip
    try:
        wait_until(lambda: metrics_up(port), 60, "the operator's metrics endpoint")
        cpu_before = {
            name: cpu_seconds(pid) for name, pid in {**others, "operator": operator.pid}.items()
        }
        spec = job_spec(nodes)
        started, wall_started = time.monotonic(), time.time()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: custom.create_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, PLURAL, operator_job(f"job-{i:04d}", **spec)),
                range(jobs)))  # fmt: skip
        applied = time.monotonic() - started
        expected = jobs * nodes
        wait_until(lambda: len(tally.created) >= expected, 900, f"{expected} pods", interval=0.2)
        all_created = tally.nth_created(expected) - started
        wait_until(lambda: tally.jobs_running() == jobs, 900, "all jobs Running", interval=0.2)
        all_running = time.monotonic() - started
        if agents:  # from now on, as on a cluster, every pod's agent answers (not timed above)
            fleet = AgentFleet(core.api_client, KeptAliveAPI(
                plane.server, token=AGENTS_TOKEN, ca_file=plane.pki.ca_cert), NAMESPACE).start()  # fmt: skip
            reported = time.monotonic()
            wait_until(lambda: len(fleet.epochs) >= expected and fleet.idle(), 900,
                       "every pod's agent reporting", interval=0.2)  # fmt: skip
            agents_settled = time.monotonic() - reported
        before_storm, wall_storm = scrape(port), time.time()
        lost, hit = storm_nodes(tally, min(storm, jobs))
        epochs = {name: tally.jobs[name][1] for name in hit}
        storm_started = time.monotonic()
        kwok.lose_nodes(core, lost)
        try:
            wait_until(lambda: tally.jobs_running(hit, epochs) == len(hit), 900,
                       f"the {len(hit)} jobs of the lost nodes Running again", interval=0.2)  # fmt: skip
        except TimeoutError:  # why the hit jobs did not recover is the figure worth keeping
            print(json.dumps({"storm_timed_out": True,
                              "storm_failures": failures(custom, NAMESPACE, hit, epochs)}), flush=True)  # fmt: skip
            raise
        storm_recovered = time.monotonic() - storm_started
        per_job = [cast(float, tally.running_again(name, epochs[name])) - storm_started
                   for name in hit]  # fmt: skip
        after, wall_end = scrape(port), time.time()
        storm_failures = failures(custom, NAMESPACE, hit, epochs)
        storm_timeline = timeline(tally, hit, epochs, storm_started)
        cpu = {name: cpu_seconds(pid) - cpu_before[name]
               for name, pid in {**others, "operator": operator.pid}.items()}  # fmt: skip
        rss = peak_rss_mib(operator.pid)
    finally:
        stop(operator, fleet)
        if spy is not None:
            spy.wait(timeout=60)  # it writes its file once the operator is gone
    scale_up = requests_between(tmp, wall_started, wall_storm)
    in_storm = requests_between(tmp, wall_storm, wall_end)
    reconciles = before_storm["reconcile"][-1][1]
    storm_reconciles = after["reconcile"][-1][1] - reconciles
    parts = {part: {"p50": histogram_quantile(0.5, after[part]), "p99": histogram_quantile(0.99, after[part])}
             for part in ("plan", "wait", "execute", "api", "own") if part in after}  # fmt: skip
    return {
        "jobs": jobs, "nodes": nodes, "pods": expected, "kwok_nodes": len(core.list_node().items),
        "apply": applied, "all_created": all_created, "all_running": all_running,
        "reconciles": reconciles,
        "reconcile_p50": histogram_quantile(0.5, before_storm["reconcile"]),
        "reconcile_p99": histogram_quantile(0.99, before_storm["reconcile"]),
        "reconcile_parts": parts,
        "api_requests": scale_up["requests"], "api_requests_per_reconcile": scale_up["requests"] / max(reconciles, 1),
        "api_by_verb": scale_up["by_verb"], "api_by_code": scale_up["by_code"], "api_refused": scale_up["refused"], "api_server_p50": scale_up["p50"], "api_server_p99": scale_up["p99"],
        "storm_nodes": len(lost), "storm_jobs": len(hit), "storm_recovered": storm_recovered,
        "storm_job_p50": quantile(per_job, 0.5), "storm_job_p99": quantile(per_job, 0.99),
        "storm_reconciles": storm_reconciles, "storm_failures": storm_failures,
        "storm_timeline": storm_timeline,
        "storm_reconcile_p99": histogram_quantile(0.99, difference(after["reconcile"], before_storm["reconcile"])),
        "storm_api_requests": in_storm["requests"], "storm_api_by_verb": in_storm["by_verb"],
        "storm_api_by_code": in_storm["by_code"],
        "cpu_seconds": cpu, "peak_rss_mib": rss, "audit_user": AUDIT_USER,
        "agents": agents, "agents_settled": agents_settled, "fleet_heartbeats": agents,
        "fleet_errors": len(fleet.errors) if fleet is not None else 0,
    }  # fmt: skip


def stop(operator: subprocess.Popen[bytes], fleet: AgentFleet | None) -> None:
    """A run's end, measured or not: the simulated agents' threads, then the operator."""
    if fleet is not None:
        fleet.stop()
    operator.kill()
    operator.wait()


def start_operator(plane: ControlPlane, tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The operator as its own process, signed in as the audited identity, watching the bench's
    namespace; its metrics port."""
    port = free_port()
    env = {**os.environ, "PHALANX_OPERATOR_NAMESPACES": json.dumps([NAMESPACE]),
           "PHALANX_OPERATOR_KUBECONFIG": str(operator_kubeconfig(plane, tmp)),
           "PHALANX_OPERATOR_METRICS_PORT": str(port), "PHALANX_OPERATOR_LIVENESS_ENDPOINT": ""}  # fmt: skip
    operator = subprocess.Popen([sys.executable, "-m", "phalanx.operator"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return operator, port


def _table(f: dict[str, Any]) -> str:
    def ms(value: float) -> str:
        return f"{value * 1000:.0f} ms"

    parts = f["reconcile_parts"]
    rows = [
        ("jobs x node pods", f"{f['jobs']} x {f['nodes']} = {f['pods']} pods on {f['kwok_nodes']} kwok nodes"),
        ("apply all jobs (8 client threads)", f"{f['apply']:.1f} s"),
        ("apply -> all pods created", f"{f['all_created']:.1f} s"),
        ("apply -> all jobs Running (kube-scheduler + kwok)", f"{f['all_running']:.1f} s"),
        ("reconciles", f"{f['reconciles']:.0f}"),
        ("reconcile p50 / p99", f"{ms(f['reconcile_p50'])} / {ms(f['reconcile_p99'])}"),
        ("  queued for a slot before it / plan / execute (of which waiting on the API server)"
         " / the operator's own (plan + execute - API), p99",
         " / ".join(ms(parts[p]["p99"]) if p in parts else "-" for p in ("wait", "plan", "execute", "api", "own"))),
        ("API server time per operator request, p50 / p99 (audit)",
         f"{ms(f['api_server_p50'])} / {ms(f['api_server_p99'])}"),
        ("operator API requests (per reconcile)",
         f"{f['api_requests']} ({f['api_requests_per_reconcile']:.2f}); "
         + ", ".join(f"{k} {v}" for k, v in sorted(f["api_by_verb"].items()))),
        ("failure storm: nodes lost at once, jobs hit",
         f"{f['storm_nodes']} nodes, {f['storm_jobs']} jobs"),
        *([("storm -> each hit job Running again, p50 / p99",
            f"{f['storm_job_p50']:.1f} / {f['storm_job_p99']:.1f} s")] if "storm_job_p99" in f else []),
        ("storm -> every hit job Running again", f"{f['storm_recovered']:.1f} s "
         f"({f['storm_reconciles']:.0f} reconciles, p99 {ms(f['storm_reconcile_p99'])}, "
         f"{f['storm_api_requests']} API requests)"),
        *([("storm: the operator's requests by verb (answers by code)",
            ", ".join(f"{k} {v}" for k, v in sorted(f["storm_api_by_verb"].items()))
            + " (" + ", ".join(f"{k}: {v}" for k, v in f["storm_api_by_code"].items()) + ")")]
          if "storm_api_by_verb" in f else []),
        *([("storm -> decided / replacements created / Running / job Running again, p50 (p99)",
            " / ".join(f"{t['p50']:.1f} ({t['p99']:.1f}) s" for t in f["storm_timeline"].values()))]
          if f.get("storm_timeline") else []),
        ("CPU seconds over the run", ", ".join(f"{k} {v:.0f}" for k, v in f["cpu_seconds"].items())),
        ("operator peak RSS", f"{f['peak_rss_mib']:.0f} MiB"),
        *_baseline_rows(f),
    ]  # fmt: skip
    return "| measure | value |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def _baseline_rows(f: dict[str, Any]) -> list[tuple[str, str]]:
    """Each baseline's times beside Phalanx's, in the same run (Phalanx / baseline: below 1 is
    faster), and its controller's requests and memory where measured."""
    rows = []
    for b in f.get("baselines", []):
        created, running = f["all_created"] / b["all_created"], f["all_running"] / b["all_running"]
        rows.append(
            (
                f"{b['system']} ({b['flags']}): apply -> all pods created / Running",
                f"{b['all_created']:.1f} s / {b['all_running']:.1f} s; Phalanx takes "
                f"{created:.2f}x / {running:.2f}x its time",
            )
        )
        cpu = ", ".join(f"{k} {v:.0f}" for k, v in b["cpu_seconds"].items())
        extra = (
            f"; {b['api_requests']} API requests, peak RSS {b['peak_rss_mib']:.0f} MiB"
            if "api_requests" in b
            else ""
        )
        rows.append((f"{b['system']}: CPU seconds", cpu + extra))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="200", help="job count, or several: 50,100,200")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument(
        "--storm", type=int, default=100, help="jobs to hit with lost nodes at once"
    )
    parser.add_argument("--profile", type=Path,
                        help="profile the operator with py-spy in a pass of its own, into this file")  # fmt: skip
    parser.add_argument("--profile-jobs", type=int,
                        help="the profiled pass's job count (default: the largest of --jobs)")  # fmt: skip
    parser.add_argument("--baselines", action="store_true",
                        help="at the largest count, the kube Job controller (bare pods, and Phalanx's) and Kubeflow's training operator too")  # fmt: skip
    parser.add_argument("--agents", action="store_true",
                        help="simulated agents report for every pod once all jobs run (the storm restarts in place)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench/results/controlplane.md"))
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    series = []
    counts = [int(n) for n in args.jobs.split(",")]
    for count in counts:
        series.append(measure(count, args.nodes, args.storm, agents=args.agents))
        if args.profile is not None and count == counts[-1]:
            series[-1]["profile"] = _profiled_pass(args.profile, args.profile_jobs or count,
                                                   args.nodes, args.storm, args.agents)  # fmt: skip
        if args.baselines and count == counts[-1]:
            series[-1]["baselines"] = [
                baselines.measure_job_controller(count, args.nodes),
                baselines.measure_job_controller(count, args.nodes, job_spec(args.nodes)),
                baselines.measure_kubeflow(count, args.nodes),
            ]
        print(json.dumps(series[-1]), flush=True)
        if args.json is not None:  # after each count: a run stopped at its limit keeps the rest
            args.json.write_text(json.dumps({"series": series}, indent=1))
    machine = f"{socket.gethostname()}: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    report = (f"# Control-plane benchmark\n\nMachine: {machine}; kube-apiserver v1.33.13 + {_etcd_version()}, "
              f"kube-scheduler and kwok, on loopback.\n\n{_table(series[-1])}\n")  # fmt: skip
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    return 0


def _profiled_pass(out: Path, jobs: int, nodes: int, storm: int, agents: bool) -> dict[str, Any]:
    """Where the operator's CPU goes, from a pass of its own under py-spy: its figures are not
    published (the sampler slows the pass it watches), only the profile, with its job count."""
    measure(jobs, nodes, min(storm, jobs // 10), out, agents)
    return summarise(out.read_text()) | {"jobs": jobs} if out.exists() else {"jobs": jobs}


def _etcd_version() -> str:
    """The etcd the control plane runs (`make binaries` builds it), as it names itself."""
    answer = subprocess.run([str(binaries_dir() / "etcd"), "--version"], capture_output=True,
                            text=True, check=False)  # fmt: skip
    first = answer.stdout.splitlines()[0] if answer.stdout else "etcd (version unknown)"
    return first.replace("etcd Version: ", "etcd ")


def metrics_up(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
