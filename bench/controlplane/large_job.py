"""One large job on kwok: a TrainingJob of 2 000 node pods created, and an in-place restart of
it fanned out to every pod's agent, beside the kube Job controller making a 2 000-completion
Indexed Job on a fresh API server with the same scheduler and kwok nodes.

The agents are simulated (`bench.controlplane.agent_fleet`): they follow the job's assignment Lease and
report on its report Leases as the agent does. Measured:

- apply -> all node pods created and -> all Running (the Job controller's the same way), and
  -> the job Running (every agent acknowledged epoch 1);
- the in-place restart: one pod's agent reports its worker killed; the operator publishes
  epoch 2 with every pod carried over; fan-out is that assignment reaching the fleet -> the last
  pod's acknowledgement written; and the failure reported -> the job Running at epoch 2;
- the operator's requests in the restart (audit log) and its peak RSS.

Usage: python -m bench.controlplane.large_job [--pods 2000] [--no-baseline] [--json large.json]
                                 [--out large.md] [--profile restart.raw]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from bench.common.process_stats import cpu_seconds, peak_rss_mib
from bench.common.profile import summarise
from bench.common.stats import quantile
from bench.common.tally import GROUP, PLURAL, VERSION
from bench.controlplane import baselines, report_largejob
from bench.controlplane.agent_fleet import FAILURE_POLICY, Acknowledged, AgentFleet, KeptAliveAPI
from bench.controlplane.audit import requests_between
from bench.controlplane.controlplane import (
    NAMESPACE,
    kwok_bench,
    metrics_up,
    profiler,
    start_operator,
    stop,
)
from harness.controlplane import wait_until
from harness.jobs import operator_job
from phalanx.models.names import node_pod_name, service_account_name

JOB = "large"
WAIT_SECONDS = 600


def measure(pods: int, profile: Path | None = None) -> dict[str, Any]:
    """A job of `pods` node pods on a fresh API server: creation and an in-place restart (with
    `profile`, the operator sampled by py-spy through the restart, into that file)."""
    with kwok_bench(pods) as bench:
        plane, tmp, api, core, custom, tally = (
            bench.plane,
            bench.tmp,
            bench.api,
            bench.core,
            bench.custom,
            bench.tally,
        )
        operator, port = start_operator(plane, Path(tmp))
        fleet: AgentFleet | None = None
        try:
            wait_until(lambda: metrics_up(port), 60, "the operator's metrics endpoint")
            started, wall_started = time.monotonic(), time.time()
            custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL,
                operator_job(JOB, **job_spec(pods)))  # fmt: skip
            fleet = AgentFleet(api, _pods_api(core, plane.server, plane.pki.ca_cert),
                               NAMESPACE).start([JOB])  # fmt: skip
            wait_until(lambda: len(tally.created) >= pods, WAIT_SECONDS, f"{pods} pods",
                       interval=0.2)  # fmt: skip
            created = tally.nth_created(pods) - started
            wait_until(lambda: len(tally.running) >= pods, WAIT_SECONDS,
                       f"{pods} pods Running", interval=0.2)  # fmt: skip
            with tally.lock:
                pods_running = sorted(tally.running.values())[pods - 1] - started
            wait_until(lambda: tally.jobs_running({JOB}) == 1, WAIT_SECONDS,
                       "the job Running", interval=0.2)  # fmt: skip
            job_running = time.monotonic() - started
            epoch = tally.jobs[JOB][1]
            wait_until(lambda: _settled(fleet, pods), WAIT_SECONDS,
                       "every agent training", interval=0.2)  # fmt: skip
            spy = profiler(operator.pid, profile) if profile is not None else None
            processes = {"operator": operator.pid, "etcd": plane.pids[0],
                         "kube-apiserver": plane.pids[1], "bench and fleet": os.getpid()}  # fmt: skip
            cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
            wall_failed, failed = time.time(), time.monotonic()
            fleet.fail(node_pod_name(JOB, epoch, pods // 2))
            wait_until(lambda: tally.jobs_running({JOB}, {JOB: epoch}) == 1, WAIT_SECONDS,
                       "the job Running again in place", interval=0.2)  # fmt: skip
            running_again = (tally.running_again(JOB, epoch) or time.monotonic()) - failed
            first = fleet.acknowledged[(JOB, epoch + 1)]
            with contextlib.suppress(TimeoutError):  # reported as it is: the pods that did
                wait_until(lambda: first.fan_out is not None, 30, "every acknowledgement")
            restart_cpu = {name: cpu_seconds(pid) - cpu_before[name]
                           for name, pid in processes.items()}  # fmt: skip
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # it writes what it sampled, and ends
                spy.wait(timeout=60)
            replaced = sum(1 for name in tally.created if not name.startswith(f"{JOB}-{epoch}-"))
            status = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, JOB)[
                "status"
            ]
            in_restart = requests_between(Path(tmp), wall_failed, time.time())
            rss = peak_rss_mib(operator.pid)
        finally:
            stop(operator, fleet)
        scale_up = requests_between(Path(tmp), wall_started, wall_failed)
    return {
        "pods": pods, "all_created": created, "all_running": pods_running,
        "job_running": job_running, "fan_out": first.fan_out,
        "acknowledged": _quantiles(first), "restart_running_again": running_again,
        "restart_new_pods": replaced, "restart_epoch": tally.jobs[JOB][1],
        "restart_failures": Counter(f"{f['reason']} (epoch {f['epoch']})"
                                    for f in status.get("failures") or []),
        "fleet_errors": fleet.errors[:20],
        "fleet_error_count": len(fleet.errors), "fleet_heartbeats": True, "api_requests": scale_up["requests"],
        "api_by_verb": scale_up["by_verb"], "api_by_code": scale_up["by_code"],
        "restart_api_requests": in_restart["requests"], "restart_api_by_verb": in_restart["by_verb"],
        "restart_api_by_code": in_restart["by_code"], "peak_rss_mib": rss,
        "restart_cpu_seconds": restart_cpu,
        **({"restart_profile": summarise(profile.read_text())}
           if profile is not None and profile.exists() else {}),
    }  # fmt: skip


def job_spec(pods: int) -> dict[str, Any]:
    """The large job's spec (and that of the pods of the Job controller's like-for-like pass)."""
    return {"replicas": {"min": pods, "max": pods}, "nprocPerNode": 1,
            "failurePolicy": FAILURE_POLICY}  # fmt: skip


def _pods_api(core: k8s.CoreV1Api, server: str, ca: Path) -> KeptAliveAPI:
    """The agents' client, with a token of the job's pods' own service account (so the Role's
    limits on what they may write apply to the fleet)."""
    name = service_account_name(JOB)
    wait_until(lambda: any(sa.metadata.name == name for sa in
                           core.list_namespaced_service_account(NAMESPACE).items),
               60, "the pods' service account")  # fmt: skip
    request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token(name, NAMESPACE, request).status.token
    return KeptAliveAPI(server, token=token, ca_file=ca)


def _quantiles(acknowledged: Acknowledged) -> dict[str, Any]:
    """How many of the epoch's pods acknowledged, and when (seconds after the fleet saw the
    assignment): the spread of a fan-out, complete or not."""
    times = sorted(t - acknowledged.seen for t in acknowledged.written.values())
    return {"pods": acknowledged.pods, "acknowledged": len(times),
            **{f"p{int(q * 100)}": quantile(times, q) for q in (0.5, 0.9, 1.0) if times}}  # fmt: skip


def _settled(fleet: AgentFleet, pods: int) -> bool:
    """Every pod's agent started the epoch and has no report left to write."""
    with fleet.lock:
        started = len(fleet.epochs)
    return started >= pods and fleet.idle()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the Indexed Job of as many completions")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the figures here, as JSON")
    parser.add_argument("--out", type=Path, help="and a Markdown table here")
    parser.add_argument("--profile", type=Path,
                        help="sample the operator through the restart (py-spy) into this file")  # fmt: skip
    args = parser.parse_args()
    figures = measure(args.pods, args.profile)
    if not args.no_baseline:
        figures["baseline"] = baselines.measure_job_controller(1, args.pods)
        figures["baseline_same_pods"] = baselines.measure_job_controller(
            1, args.pods, job_spec(args.pods)
        )
        figures["created_ratio"] = figures["all_created"] / figures["baseline"]["all_created"]
    print(json.dumps(figures, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.out is not None:
        args.out.write_text("\n".join(report_largejob.section(figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
