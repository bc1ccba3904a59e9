"""Control-plane benchmark: N TrainingJobs x M node pods against the real API server.

The operator runs as its own process (so its RSS is its own). The benchmark applies all jobs,
waits until every node pod exists, then plays a fast kubelet (binds and runs every pod) and waits
until every job is Running. It reports apply -> all pods created, apply -> all Running, reconcile
p50/p99 (from the operator's histogram, interpolated as Prometheus' histogram_quantile does) and
the operator's peak RSS.

Usage: python -m bench.controlplane [--jobs 200] [--nodes 8] [--out bench/results/controlplane.md]
                                    [--json figures.json]

`--jobs` may list several counts (`50,100,200`): each is measured on a fresh API server, and the
JSON holds one entry per count (latency against the number of jobs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.integration.operator.conftest import training_job
from tests.support.controlplane import free_port, running_control_plane, wait_until
from tests.support.kubelet import FakeKubelet


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets."""
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-9)
        lower, below = upper, count
    return lower


def scrape_reconcile_buckets(port: int) -> list[tuple[float, float]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("phalanx_reconcile_duration_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    return sorted(buckets)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(jobs: int, nodes: int) -> dict[str, float]:
    """`jobs` TrainingJobs of `nodes` node pods each, on a fresh API server: the figures."""
    namespace = "bench"
    with tempfile.TemporaryDirectory() as tmp, running_control_plane(Path(tmp)) as plane:
        api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
        k8s.CoreV1Api(api).create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace))
        )
        kubelet = FakeKubelet(api, namespace)
        kubelet.add_nodes(*(f"node-{i}" for i in range(nodes)))
        port = free_port()
        env = {**os.environ, "PHALANX_OPERATOR_NAMESPACES": json.dumps([namespace]),
               "PHALANX_OPERATOR_KUBECONFIG": str(plane.kubeconfig), "PHALANX_OPERATOR_METRICS_PORT": str(port),
               "PHALANX_OPERATOR_LIVENESS_ENDPOINT": ""}  # fmt: skip
        operator = subprocess.Popen([sys.executable, "-m", "phalanx.operator"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_until(lambda: _up(port), 60, "the operator's metrics endpoint")
            custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
            spec = {"replicas": {"min": nodes, "max": nodes}, "nprocPerNode": 1}
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: custom.create_namespaced_custom_object(
                    "phalanx.dev", "v1alpha1", namespace, "trainingjobs", training_job(f"job-{i:04d}", **spec)),
                    range(jobs)))  # fmt: skip
            applied = time.monotonic() - started
            expected = jobs * nodes

            def pods() -> list[k8s.V1Pod]:
                return core.list_namespaced_pod(
                    namespace, label_selector="phalanx.dev/role=node"
                ).items

            wait_until(lambda: len(pods()) >= expected, 600, f"{expected} pods", interval=0.5)
            all_created = time.monotonic() - started

            def start(pod: k8s.V1Pod) -> None:
                kubelet.bind(
                    pod.metadata.name, f"node-{pod.metadata.labels['phalanx.dev/node-rank']}"
                )
                kubelet.run(pod.metadata.name)

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(start, pods()))

            def running() -> int:
                listed = custom.list_namespaced_custom_object(
                    "phalanx.dev", "v1alpha1", namespace, "trainingjobs"
                )["items"]
                return sum(1 for j in listed if (j.get("status") or {}).get("phase") == "Running")

            wait_until(lambda: running() == jobs, 600, "all jobs Running", interval=0.5)
            all_running = time.monotonic() - started
            buckets = scrape_reconcile_buckets(port)
            rss = peak_rss_mib(operator.pid)
        finally:
            operator.kill()
            operator.wait()
            kubelet.close()
    return {
        "jobs": jobs, "nodes": nodes, "pods": expected, "apply": applied,
        "all_created": all_created, "all_running": all_running,
        "reconciles": buckets[-1][1] if buckets else 0,
        "reconcile_p50": histogram_quantile(0.5, buckets),
        "reconcile_p99": histogram_quantile(0.99, buckets), "peak_rss_mib": rss,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="200", help="job count, or several: 50,100,200")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("bench/results/controlplane.md"))
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    series = [measure(int(n), args.nodes) for n in args.jobs.split(",")]
    f = series[-1]
    rows = [
        ("jobs x node pods", f"{f['jobs']} x {f['nodes']} = {f['pods']} pods"),
        ("apply all jobs (8 client threads)", f"{f['apply']:.1f} s"),
        ("apply -> all pods created", f"{f['all_created']:.1f} s"),
        ("apply -> all jobs Running (test as fast kubelet)", f"{f['all_running']:.1f} s"),
        ("reconciles", f"{f['reconciles']:.0f}"),
        (
            "reconcile p50 / p99",
            f"{f['reconcile_p50'] * 1000:.0f} ms / {f['reconcile_p99'] * 1000:.0f} ms",
        ),
        ("operator peak RSS", f"{f['peak_rss_mib']:.0f} MiB"),
    ]
    machine = f"{socket.gethostname()}: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    table = "| measure | value |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    report = f"# Control-plane benchmark\n\nMachine: {machine}; kube-apiserver v1.33.13 + etcd 3.5.1 on loopback.\n\n{table}\n"
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    if args.json is not None:
        args.json.write_text(json.dumps({"series": series}, indent=1))
    return 0


def _up(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
