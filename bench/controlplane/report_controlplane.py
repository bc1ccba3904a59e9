"""The report's control-plane section (`bench.controlplane.controlplane`): TrainingJobs by the thousand on
the real API server, kube-scheduler and kwok nodes, a failure storm, and where the time goes."""

from __future__ import annotations

from typing import Any

from bench.common.report_format import pct as _pct
from bench.controlplane import targets_controlplane

Figures = dict[str, Any]
TOP_VERBS = 10


CREATION_NOTE = (
    "Why the pods come later than the bare Indexed Jobs' (this run, and side runs of the "
    "1 000-job pass alone to the last pod created, on this machine): every process shares the 2 "
    "cores and all are busy, so the difference is work. The Job controller's bare pods are a "
    "container and its image. Phalanx's carry the 13 variables that differ per pod or epoch (the "
    "job's 23 others come from its ConfigMap by envFrom), a /dev/shm volume, five labels and a "
    "spread over nodes (6.0 kB as the API server returns it, managedFields and status included), "
    "and the job's headless Service, which gives them their DNS names, selects them. The same Job "
    "controller making Phalanx's pods, each Job with such a Service and ConfigMap, took 85.7 s in "
    "this run (bare: 58.7 s): kube-scheduler 36 CPU-s instead of 20, kube-apiserver 85 instead "
    "of 56, kwok 45 instead of 16. Phalanx's 98.7 s is 1.15x that like-for-like pass. The rest "
    "is its own: the operator's CPU, seven objects per job beside the pods, the Service and the "
    "ConfigMap (ServiceAccount, Role, RoleBinding, two Leases, PodDisruptionBudget, an Event) "
    "and two to three status writes. Since 015dddb the jobs carry no finalizer: each job's loop "
    "is an asyncio task of the operator's own, started by kopf's on.event, not a kopf daemon, so "
    "no new job's first write waits for a finalizer patch to come back (1 000 requests fewer; "
    "the last published run, 114.5 s, 2.19x, had them). What the bare Job controller's time "
    "would take, from scratch hooks in side runs at 015dddb (creation only, each batch with its "
    "own bare Job controller pass): with no ServiceAccount, Role, RoleBinding, Service, Lease, "
    "budget, ConfigMap or /dev/shm volume at all (the spread over nodes kept), 80.7 s (156 "
    "CPU-s, the operator 28.5 of them where the controller manager used 12) against 63.5 and "
    "71.0 s: 1.14-1.27x for a Phalanx that makes nothing but its pods. The bare Job "
    "controller's own time ranged over 52.2-71.0 s in the runs of 2ccf013 and 015dddb. Why the "
    "objects stay per job: a Role names objects, not labels (one per namespace would let any "
    "job's pods write every Lease there), and a budget per namespace would have no owner to go "
    "with (README). The spread: a Service that selects pods turns on kube-scheduler's default "
    "constraints (hosts and zones), 60-63 CPU-s to place the 8 000 pods; the pods' own hostname "
    "constraint, 34-37; no Service, 22. Tried and not kept: managedFields reset on create "
    "(`[{}]`: the API server records a create's fields anyway), orjson decoding kopf's watch "
    "events, 16 or 32 API threads."
)
"""Where the 1 000-job pass's creation time goes, measured beside the published runs."""


def _storm_per_job(s: Figures) -> str:
    """Each hit job's time to Running again, where the run timed each job."""
    if "storm_job_p99" not in s:
        return ""
    return f"{s['storm_job_p50']:.1f} / {s['storm_job_p99']:.1f} s, "


def _storm_timeline(s: Figures) -> list[str]:
    """Where a hit job's way back goes (`bench/controlplane/storm.py`), where the run timed its stages."""
    stages = s.get("storm_timeline")
    if not stages:
        return []
    words = {"decided": "its new epoch decided", "pods_created": "its replacement pods created",
             "pods_running": "they run (kube-scheduler, then kwok, which moves 32 pods on at once)",
             "running_again": "the job Running again (every carried-over pod's agent acknowledged)"}  # fmt: skip
    said = [f"{words[k]} {v['p50']:.1f} / {v['p99']:.1f} s" for k, v in stages.items()]
    return ["", f"The storm at {s['jobs']} jobs, each hit job's way back (p50 / p99 over the "
            f"{s['storm_jobs']} jobs, after the nodes were lost): " + ", ".join(said) + "."]  # fmt: skip


def _reconcile_parts(parts: dict[str, Any]) -> str:
    """The reconcile's parts, p99 (p50 for the queue): those its operator measured."""
    latency = targets_controlplane.reconcile_latency
    words = {"plan": "plan", "execute": "execute (its API writes)",
             "api": "of which waiting on the API server's answers",
             "own": "the operator's own time (plan + execute less the API server's)"}  # fmt: skip
    said = [
        f"{what} {latency(parts[part]['p99'])}" for part, what in words.items() if part in parts
    ]
    queue = ("queued for a slot before it" if "own" in parts
             else "waiting for an executor thread")  # fmt: skip
    said.append(f"{queue} {latency(parts['wait']['p99'])} (p50 {latency(parts['wait']['p50'])})")
    return ", ".join(said)


def controlplane_section(series: list[Figures]) -> list[str]:
    lines = ["## Control plane: the real API server, kube-scheduler and kwok nodes", "",
             "Targets: 8 000 pods created in at most 60 s, reconcile p99 at most 1 s (the API "
             "server's own time reported apart), operator RSS at most 300 MB.", "",
             "| jobs x pods | apply -> pods created | apply -> Running | reconcile p50 / p99 "
             "| API server p50 / p99 | requests / reconcile | operator CPU | peak RSS "
             "| storm: nodes lost, jobs hit -> each Running again (p50 / p99), the last |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for s in series:
        lines.append(
            f"| {s['jobs']} x {s['nodes']} | {s['all_created']:.1f} s | {s['all_running']:.1f} s "
            f"| {targets_controlplane.reconcile_latency(s['reconcile_p50'])} / "
            f"{targets_controlplane.reconcile_latency(s['reconcile_p99'])} "
            f"| {s['api_server_p50'] * 1000:.0f} / {s['api_server_p99'] * 1000:.0f} ms "
            f"| {s['api_requests_per_reconcile']:.2f} | {s['cpu_seconds']['operator']:.0f} s "
            f"| {s['peak_rss_mib']:.0f} MiB | {s['storm_nodes']}, {s['storm_jobs']} -> "
            f"{_storm_per_job(s)}{s['storm_recovered']:.1f} s |"
        )
    last = series[-1]
    parts = last["reconcile_parts"]
    if last.get("agents"):
        lines += ["", "Once every job ran, simulated agents (`bench/controlplane/agent_fleet.py`, the agent's "
                  "own protocol) reported for every pod (settled in "
                  f"{last['agents_settled']:.1f} s at {last['jobs']} jobs, before the storm): the "
                  "storm's surviving pods restart in place, as the agent's pods do on a cluster, "
                  "and only the lost ones are created again."]  # fmt: skip
        if last.get("fleet_heartbeats"):
            lines[-1] += (" Each epoch's rank 0 writes its heartbeat once, with a first step; "
                          "the jobs set hangTimeoutSeconds and startupTimeoutSeconds past the run "
                          "(`bench.controlplane.controlplane.AGENTS_LATE_SECONDS`).")  # fmt: skip
    lines += _storm_timeline(last)
    lines += [
        "",
        f"At {last['jobs']} jobs, where a reconcile's time goes (p99): "
        + _reconcile_parts(parts) + ". CPU seconds over the run: "
        + ", ".join(f"{k} {v:.0f}" for k, v in last["cpu_seconds"].items())
        + f". The operator's requests (audit log), the {TOP_VERBS} most frequent: "
        + ", ".join(f"{k} {v}" for k, v in list(last["api_by_verb"].items())[:TOP_VERBS])
        + f"; {sum(list(last['api_by_verb'].values())[TOP_VERBS:])} others (discovery, lists "
        "and watches). Answers by status code: "
        + ", ".join(f"{k} {v}" for k, v in last["api_by_code"].items())
        + " (a 409 is a create of what exists already)."
        + (" Refused, the most frequent: " + "; ".join(
            f"{k} ({v})" for k, v in list(last["api_refused"].items())[:5]) + "."
           if last.get("api_refused") else ""),
    ]  # fmt: skip
    lines += ["", CREATION_NOTE]
    if "profile" in last:
        profile = last["profile"]
        lines += ["", f"Where the operator's time goes at {profile.get('jobs', last['jobs'])} jobs, "
                  "in a pass of its own whose times are not published (py-spy slows what it "
                  f"watches on 2 cores): {profile['samples']} samples of its busy threads; `ssl` "
                  "includes threads waiting "
                  "for the API server's answers): by the library the sample is in, "
                  + ", ".join(f"{k} {_pct(v)}" for k, v in profile["self_by_library"].items())
                  + "; by the operator's own functions, with what they call, "
                  + ", ".join(f"`{k.removeprefix('phalanx.operator.')}` {_pct(v)}"
                              for k, v in profile["inclusive_by_phalanx_function"].items())
                  + ". `<module>` and `main` are the event loop's thread (the pod watch, kopf's "
                  "watches, indices and handlers); the executor's threads run `execute`."]  # fmt: skip
    return lines
