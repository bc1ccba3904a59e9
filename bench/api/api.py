"""API service benchmark: list and get from its watch cache vs the same reads from the kube API.

Why: the API service answers reads from a watch cache so that a page of jobs costs a dictionary
scan, not a read and decode in the API server and etcd. This measures that claim with N
TrainingJobs (1 000 by default) on the real API server, side by side with a direct kube-API read
of the same objects by the same caller.

How: etcd + kube-apiserver start on loopback with the shipped CRD, N jobs are created in one
namespace, and the API service starts as its own process (`python -m phalanx.server`, so the load
generator does not share its GIL) and is waited for until its cache holds all N. Before timing,
both sides must agree (the first page's names, one job's uid), and the kube-apiserver's own
request counter must show no LIST of trainingjobs while the service answers lists. The caller is a
service account with a Role on trainingjobs there and a token from TokenRequest for each side's
audience. The service keeps its default caches (a TokenReview is reused for
`authn_cache_seconds`, a SubjectAccessReview for `authz_cache_seconds`), so the steady state is
measured, with the periodic review in the tail. One keep-alive httpx client per target
(per thread under concurrency), HTTP/1.1 on both sides. A request is timed from send to the
last byte of the body; JSON decode is outside the timing on both sides, except in the full-list
walk, where each page is decoded on both sides to read its continue token.

Series, each after a warm-up and interleaved in rounds (targets in rotated order each round) so
that noise hits both sides alike: a page of `--page` jobs, one job, a different job per request
(a name not asked before each time: the namespace-wide RBAC decision covers it), and the
full list of N jobs; list and get again with `--concurrency` client threads. Reported: p50, p99
(nearest rank), mean, requests/s, CPU per request of the servers (API service + kube-apiserver +
etcd, from /proc) and of the load generator, and the ratios. Default run: under 2 minutes on 2
cores.

Usage: python -m bench.api.api [--jobs 1000] [--requests 50] [--rounds 10] [--concurrency 8]
                           [--out bench/results/api.md]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from bench.api.api_report import Setup, figures_json, load_average, render
from bench.api.api_series import KUBE_PAGE, Op, Outcome, Series, Target
from bench.api.api_service import (
    NAMESPACE,
    cache_probe,
    check_agreement,
    create_jobs,
    kube_client_for,
    kube_jobs,
    running_service,
    versions,
    wait_for_cache,
)
from harness.controlplane import free_port, running_control_plane
from harness.pki import make_pki
from harness.rbac import grant_jobs, identity
from phalanx.server.settings import ServerSettings

SERVER_PROCESSES = ("etcd", "kube-apiserver")
"""Besides the API service: whose CPU counts as serving (the controller manager does not)."""


def fetch(path: str) -> Op:
    """GET `path` (the request number is ignored)."""

    def op(client: httpx.Client, _: int) -> Outcome:
        response = client.get(path)
        return Outcome(response.status_code == 200, len(response.content), _problem(response))

    return op


def fetch_each(path_of: Callable[[int], str]) -> Op:
    """GET a different path per request."""
    return lambda client, i: fetch(path_of(i))(client, i)


def walk(
    path: str,
    query: dict[str, str],
    limit: int,
    token_of: Callable[[dict[str, Any]], str | None],
    n: int,
) -> Op:
    """Every page of `path`, `limit` at a time; fails unless the pages hold `n` items."""

    def op(client: httpx.Client, _: int) -> Outcome:
        token, items, size = None, 0, 0
        while True:
            params = {**query, "limit": str(limit), **({"continue": token} if token else {})}
            response = client.get(path, params=params)
            size += len(response.content)
            if response.status_code != 200:
                return Outcome(False, size, _problem(response))
            body = response.json()
            items += len(body["items"])
            token = token_of(body)
            if not token:
                return Outcome(items == n, size, f"{items} items, not {n}")

    return op


def _problem(response: httpx.Response) -> str:
    return "" if response.status_code == 200 else f"{response.status_code}: {response.text[:300]}"


def server_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the serving processes have used so far."""
    ticks = 0
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 2 :].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def run_sequential(target: Target, client: httpx.Client, n: int, start: int, into: Series) -> None:
    for i in range(start, start + n):
        began = time.perf_counter()
        outcome = target.op(client, i)
        into.add(time.perf_counter() - began, outcome)


def run_concurrent(
    target: Target, clients: list[httpx.Client], n: int, start: int, into: Series
) -> None:
    per = math.ceil(n / len(clients))
    lock = threading.Lock()

    def worker(k: int) -> None:
        mine = Series()
        run_sequential(target, clients[k], per, start + k * per, mine)
        with lock:
            into.latencies.extend(mine.latencies)
            into.size += mine.size
            into.errors += mine.errors
            into.problem = into.problem or mine.problem

    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(worker, range(len(clients))))


@dataclass(frozen=True)
class Plan:
    """How much to measure, and whose CPU to count."""

    requests: int
    """Per target and round."""
    rounds: int
    warmup: int
    """Requests per target before the first round, not counted."""
    pids: list[int]


def measure(
    targets: list[Target],
    clients: dict[str, list[httpx.Client]],
    plan: Plan,
    concurrent: bool = False,
) -> dict[Target, Series]:
    """Warm up every target, then `plan.rounds` rounds of `plan.requests` each, the targets in
    rotated order each round."""
    results = {t: Series() for t in targets}
    done = dict.fromkeys(targets, 0)
    pids = plan.pids

    def one(target: Target, n: int, into: Series) -> None:
        if concurrent:
            run_concurrent(target, clients[target.side], n, done[target], into)
            done[target] += math.ceil(n / len(clients[target.side])) * len(clients[target.side])
        else:
            run_sequential(target, clients[target.side][0], n, done[target], into)
            done[target] += n

    for target in targets:
        one(target, plan.warmup, Series())
    for r in range(plan.rounds):
        for target in targets[r % len(targets) :] + targets[: r % len(targets)]:
            into = results[target]
            cpu, mine, began = server_cpu(pids), time.process_time(), time.perf_counter()
            one(target, plan.requests, into)
            into.wall += time.perf_counter() - began
            into.cpu += server_cpu(pids) - cpu
            into.client_cpu += time.process_time() - mine
    return results


def targets(names: list[str], page: int) -> dict[str, list[Target]]:
    """The series, each a list of targets measured side by side."""
    n, api_jobs, kube_list = len(names), "/api/v1/jobs", kube_jobs()
    in_namespace = {"namespace": NAMESPACE}

    def api_job(i: int) -> str:
        return f"/api/v1/namespaces/{NAMESPACE}/jobs/{names[i % n]}"

    def kube_job(i: int) -> str:
        return f"{kube_list}/{names[i % n]}"

    def api_token(body: dict[str, Any]) -> str | None:
        return str(body["continue"]) if body.get("continue") else None

    def kube_token(body: dict[str, Any]) -> str | None:
        return str(body["metadata"]["continue"]) if body["metadata"].get("continue") else None

    listing, each, whole = f"list, limit={page}", "get, a new job each time", f"all {n}, pages of"
    return {
        "list": [
            Target(listing, "API", fetch(f"{api_jobs}?namespace={NAMESPACE}&limit={page}")),
            Target(listing, "kube", fetch(f"{kube_list}?limit={page}")),
        ],
        "get": [
            Target("get one job", "API", fetch(api_job(n // 2))),
            Target("get one job", "kube", fetch(kube_job(n // 2))),
        ],
        "get-each": [
            Target(each, "API", fetch_each(api_job)),
            Target(each, "kube", fetch_each(kube_job)),
        ],
        "full": [
            Target(f"{whole} {page}", "API", walk(api_jobs, in_namespace, page, api_token, n)),
            Target(
                f"{whole} {KUBE_PAGE}", "API", walk(api_jobs, in_namespace, KUBE_PAGE, api_token, n)
            ),
            Target(f"{whole} {KUBE_PAGE}", "kube", walk(kube_list, {}, KUBE_PAGE, kube_token, n)),
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=50, help="per target and round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=20, help="requests per target, discarded")
    parser.add_argument("--page", type=int, default=100, help="the list's limit")
    parser.add_argument("--out", type=Path, default=Path("bench/results/api.md"))
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        plane = stack.enter_context(running_control_plane(Path(tmp) / "plane"))
        admin = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
        stack.callback(admin.close)
        k8s.CoreV1Api(admin).create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE))
        )
        began = time.monotonic()
        names = create_jobs(admin, args.jobs)
        created = time.monotonic() - began
        reader = identity(admin, NAMESPACE, "bench-reader")
        grant_jobs(admin, NAMESPACE, reader)

        pki = make_pki(Path(tmp) / "service-pki")  # as the chart makes one for the service
        settings = ServerSettings(kubeconfig=plane.kubeconfig, host="127.0.0.1", port=free_port(),
                                  tls_cert_file=pki.serving_cert, tls_key_file=pki.serving_key)  # fmt: skip
        log = Path(tmp) / "phalanx-api.log"
        began = time.monotonic()
        service = stack.enter_context(running_service(settings, log))
        url = f"https://{settings.host}:{settings.port}"
        service_tls = ssl.create_default_context(cafile=str(pki.ca_cert))

        def api_client() -> httpx.Client:
            return httpx.Client(base_url=url, headers=reader.headers, verify=service_tls,
                                timeout=60)  # fmt: skip

        kube_client = kube_client_for(plane, reader)
        clients = {
            side: [stack.enter_context(make()) for _ in range(max(1, args.concurrency))]
            for side, make in (("API", api_client), ("kube", kube_client))
        }
        wait_for_cache(clients["API"][0], service, args.jobs, log)
        filled = time.monotonic() - began
        log_offset = log.stat().st_size  # 503s from /readyz before the cache filled do not count
        agreement = check_agreement(clients["API"][0], clients["kube"][0], args.page, names[0])
        from_cache = cache_probe(plane, clients["API"][0], args.page)
        pids = [service.pid] + [
            pid
            for pid in plane.pids
            if Path(f"/proc/{pid}/comm").read_text().strip() in SERVER_PROCESSES
        ]

        load_before = load_average()
        series = targets(names, args.page)
        plan = Plan(args.requests, args.rounds, args.warmup, pids)
        sequential: dict[Target, Series] = {}
        for name in ("list", "get", "get-each"):
            sequential |= measure(series[name], clients, plan)
        full_plan = Plan(max(1, args.requests // 10), args.rounds, 2, pids)
        full = measure(series["full"], clients, full_plan)
        concurrent: dict[Target, Series] = {}
        for name in ("list", "get"):
            concurrent |= measure(series[name], clients, plan, concurrent=True)
        served_5xx = sum(
            1 for line in log.read_bytes()[log_offset:].decode().splitlines() if '" 5' in line
        )
        about = versions(plane, clients["kube"][0])
        load = f"{load_before} before the first series, {load_average()} after the last"
        setup = Setup(about, created, filled, agreement, from_cache, settings, served_5xx, load)
    report = render(args, setup, sequential, full, concurrent, full_plan.requests)
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    if args.json is not None:
        modes = {"sequential": sequential, "full list": full, "concurrent": concurrent}
        args.json.write_text(figures_json(args.jobs, modes))
    failed = any(s.errors for r in (sequential, full, concurrent) for s in r.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
