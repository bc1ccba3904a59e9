"""bench/api's report: the machine, the tables of each series, the kube / API ratios and the
findings in words, as markdown (bench/results/api.md)."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.api.api_series import KUBE_PAGE, Series, Target
from phalanx.server.settings import ServerSettings


def machine() -> str:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    return (
        f"{platform.node()}: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"{total / 1024**2:.1f} GiB memory, Python {platform.python_version()}"
    )


def load_average() -> str:
    """The 1-minute load average: other work on the machine skews every number here."""
    return Path("/proc/loadavg").read_text().split()[0]


def row(target: Target, series: Series) -> str:
    n = len(series.latencies)
    mean = sum(series.latencies) / n
    return (
        f"| {target.operation} | {target.side} | {series.quantile(0.5) * 1000:.2f} ms "
        f"| {series.quantile(0.99) * 1000:.2f} ms | {mean * 1000:.2f} ms | {series.rate:.0f} "
        f"| {series.cpu / n * 1000:.2f} ms | {series.client_cpu / n * 1000:.2f} ms "
        f"| {series.size / n / 1024:.1f} KiB | {n} "
        f"| {series.errors} |"
    )


def table(results: dict[Target, Series]) -> str:
    head = (
        "| operation | target | p50 | p99 | mean | req/s | server CPU / req | client CPU / req "
        "| response | requests | errors |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    return head + "\n".join(row(t, s) for t, s in results.items())


def ratios(results: dict[Target, Series]) -> list[tuple[str, float, float, float]]:
    """(operation, p50 kube/API, p99 kube/API, req/s API/kube) for each kube target, against
    the API target of the same operation."""
    out = []
    for kube_target, kube in results.items():
        if kube_target.side != "kube":
            continue
        api = next(
            s
            for t, s in results.items()
            if t.side == "API" and t.operation == kube_target.operation
        )
        p50, p99 = kube.quantile(0.5) / api.quantile(0.5), kube.quantile(0.99) / api.quantile(0.99)
        out.append((kube_target.operation, p50, p99, api.rate / kube.rate))
    return out


def ratio_table(sections: dict[str, dict[Target, Series]]) -> str:
    lines = [
        "| operation | mode | p50 kube / API | p99 kube / API | req/s API / kube |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode, results in sections.items():
        for operation, p50, p99, rate in ratios(results):
            lines.append(f"| {operation} | {mode} | {p50:.1f}x | {p99:.1f}x | {rate:.1f}x |")
    return "\n".join(lines)


def findings(
    sequential: dict[Target, Series],
    full: dict[Target, Series],
    concurrent: dict[Target, Series],
    concurrency: int,
) -> str:
    """The measured numbers and ratios, in words: one line per operation."""

    def pick(results: dict[Target, Series], side: str, operation: str = "") -> Series:
        return next(
            s
            for t, s in results.items()
            if t.side == side and t.operation == (operation or t.operation)
        )

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.1f} ms"

    lines = []
    for operation in (next(iter(sequential)).operation, "get one job"):
        api, kube = pick(sequential, "API", operation), pick(sequential, "kube", operation)
        api_c, kube_c = pick(concurrent, "API", operation), pick(concurrent, "kube", operation)
        lines.append(
            f"- {operation}: p50 {ms(api.quantile(0.5))} from the service's cache vs "
            f"{ms(kube.quantile(0.5))} from the kube API (kube / API "
            f"{kube.quantile(0.5) / api.quantile(0.5):.1f}x), p99 {ms(api.quantile(0.99))} vs "
            f"{ms(kube.quantile(0.99))}; {api.rate:.0f} vs {kube.rate:.0f} req/s from one client, "
            f"{api_c.rate:.0f} vs {kube_c.rate:.0f} req/s from {concurrency}; server CPU "
            f"{ms(api.cpu / len(api.latencies))} vs {ms(kube.cpu / len(kube.latencies))} "
            "per request."
        )
    each = "get, a new job each time"
    api, kube = pick(sequential, "API", each), pick(sequential, "kube", each)
    lines.append(
        f"- {each}: p50 {ms(api.quantile(0.5))} vs {ms(kube.quantile(0.5))} (kube / API "
        f"{kube.quantile(0.5) / api.quantile(0.5):.1f}x): another job per request, under the "
        "one cached namespace-wide RBAC decision."
    )
    kube = pick(full, "kube")
    walks = ", ".join(
        f"{ms(s.quantile(0.5))} in {t.operation.split(', ')[1]}"
        for t, s in full.items()
        if t.side == "API"
    )
    lines.append(
        f"- every job, page after page: p50 {walks} from the service vs "
        f"{ms(kube.quantile(0.5))} from the kube API (pages of {KUBE_PAGE})."
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class Setup:
    """What the run started with, for the report."""

    about: str
    created: float
    filled: float
    agreement: str
    from_cache: str
    settings: ServerSettings
    served_5xx: int
    load: str


def render(
    args: argparse.Namespace,
    setup: Setup,
    sequential: dict[Target, Series],
    full: dict[Target, Series],
    concurrent: dict[Target, Series],
    full_walks: int,
) -> str:
    command = (
        f"python -m bench.api.api --jobs {args.jobs} --requests {args.requests} "
        f"--rounds {args.rounds} --concurrency {args.concurrency} --warmup {args.warmup} "
        f"--page {args.page}"
    )
    errors = [
        f"{t.side} {t.operation}: {s.errors} errors, the first: {s.problem}"
        for results in (sequential, full, concurrent)
        for t, s in results.items()
        if s.errors
    ]
    rounds = f"{args.rounds} rounds x {args.requests} requests per target"
    both = {"sequential": sequential | full, f"{args.concurrency} clients": concurrent}
    return f"""# API service: reads from its cache vs the kube API

Measured {datetime.now(UTC):%Y-%m-%d} on {machine()}; {setup.about}, all on loopback. \
Command: `{command}`

{args.jobs} TrainingJobs in one namespace, created in {setup.created:.1f} s (8 client threads). \
The API service, its own process, answered with all {args.jobs} from its cache \
{setup.filled:.1f} s after it started. Caller: a service account with a Role on trainingjobs in \
the namespace; the same token goes to both sides. The service's caches are at their defaults: \
a TokenReview is reused for {setup.settings.authn_cache_seconds:g} s and a SubjectAccessReview \
for {setup.settings.authz_cache_seconds:g} s, so this is the steady state, with one review per \
period in the tail. Answers agree: {setup.agreement}. From the cache: {setup.from_cache}.

## One client per side ({rounds})

{table(sequential)}

## Every job, page after page (one client, {args.rounds} rounds x {full_walks} walks per target; \
a walk counts as one request)

{table(full)}

## {args.concurrency} clients per side ({args.rounds} rounds x {args.concurrency} clients x \
{math.ceil(args.requests / args.concurrency)} requests per target)

{table(concurrent)}

## Ratios

{ratio_table(both)}

## What this shows

{findings(sequential, full, concurrent, args.concurrency)}

How it is measured: a request is timed from sending to the body's last byte, over a keep-alive \
HTTP/1.1 connection, TLS on both sides (the service with a certificate made as the chart makes \
one, the kube API with its own); JSON decode is not timed, \
except in the page-after-page walk, where both sides decode each page for its continue token. \
The two sides do not send the same bytes: the service answers with job summaries, the kube API \
with whole objects (the response column). Server CPU / req is the user + system time of the API \
service, kube-apiserver and etcd over a series, per request; the service's side includes the \
reviews it asks the API server for. "get, a new job each time" names another job in every \
request; the service's cached namespace-wide RBAC decision covers every name, so this shows \
whether a page that reads many jobs pays a review per job. The load generator, the service, kube-apiserver and etcd share the machine's \
{os.cpu_count()} CPUs (1-minute load average {setup.load}). The service runs as `phalanx-api` \
does (one uvicorn worker, access log on).

5xx in the service's access log: {setup.served_5xx}. \
{"Errors: " + "; ".join(errors) if errors else "No request failed."}
"""


def figures_json(jobs: int, modes: dict[str, dict[Target, Series]]) -> str:
    """The figures for `python -m bench`'s report: each target's p50, p99 and rate, by mode."""
    return json.dumps({"jobs": jobs, "series": [
        {"mode": mode, "operation": t.operation, "side": t.side, "p50": s.quantile(0.5),
         "p99": s.quantile(0.99), "rate": s.rate, "errors": s.errors,
         "bytes": s.size / len(s.latencies) if s.latencies else 0}
        for mode, measured in modes.items() for t, s in measured.items()
    ]}, indent=1)  # fmt: skip
