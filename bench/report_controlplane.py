"""The report's control-plane section (`bench.controlplane`): TrainingJobs by the thousand on
the real API server, kube-scheduler and kwok nodes, a failure storm, and where the time goes."""

from __future__ import annotations

from typing import Any

from bench import targets_controlplane
from bench.report_format import pct as _pct

Figures = dict[str, Any]
TOP_VERBS = 10


CREATION_NOTE = (
    "Why the pods come later than the bare Indexed Jobs' (this run, and side runs of the "
    "1 000-job pass alone to the last pod created, on this machine): every process shares the 2 "
    "cores and all are busy, so the difference is work. The Job controller's bare pods are a "
    "container and its image; Phalanx's carry its env contract (36 variables), a /dev/shm volume "
    "and five labels (9.3 kB as stored, managedFields included), and the job's headless Service, "
    "which gives them their DNS names, selects them. The same Job controller making Phalanx's "
    "pods, each Job with such a Service, took 111.4 s in this run (bare: 57.4 s): kube-scheduler "
    "80 CPU-s instead of 20 (a Service selecting the pods turns on the scheduler's default "
    "topology spreading: with the Service alone, in a side run, 25 -> 44 CPU-s and 91 -> 109 s), "
    "kube-apiserver 105 instead of 53, kwok 54 instead of 18. Phalanx's 127.5 s is 1.14x that "
    "like-for-like pass (a second side-by-side run, creation only, at 6d2532e: Phalanx 128.3 s, "
    "the bare Job controller 53.2 s, 2.41x, the like-for-like pass 97.8 s, 1.31x). The rest is "
    "its own: the operator (49 CPU-s to the last pod created at "
    "672b5e7, in a side run whose 284 CPU-s were kube-apiserver 112, kube-scheduler 66, kwok 38, "
    "etcd 13, kube-controller-manager 7) and eight objects per job beside the pods "
    "(ServiceAccount, Role, RoleBinding, Service, two Leases, PodDisruptionBudget, an Event), "
    "kopf's finalizer patch and two to three status writes. At 672b5e7 the operator stopped "
    "watching pods through a kopf index (its own list and watch, as client-go's informers do) "
    "and sends its creates as JSON past the kubernetes client's per-call pydantic validation: its "
    "CPU to the last pod created went from 78-89 to 49 CPU-s at 1 000 jobs and from 24.0 to 13.0 "
    "at 300 (side runs); pods created 174.3 s at bbb4e32, 127.5 s here. The bare figure moved "
    "too, 86.0 -> 57.4 s: kwok's default stages completed a Job's pods as soon as they ran (a "
    "status write, the Job controller's finalizer patch, Job status writes), work Phalanx's "
    "pods, owned by a TrainingJob, never caused; the bench's kwok now keeps every controller's "
    "pods Running (`bench/kwok.py`). What would close the rest: smaller pods. In a side run "
    "whose pods kept only the 11 variables that change with the epoch or rank and took the job's "
    "constant ones from a ConfigMap by envFrom (a scratch hook; the ConfigMaps' 1 000 creates not "
    "made), pods were created in 120.6 s instead of 146.9 s and the processes used 233 CPU-s "
    "instead of 284 (kube-apiserver 91 / 112, kube-scheduler 54 / 66, the operator 40 / 49). "
    "Then fewer objects per job (one ServiceAccount, Role and RoleBinding per namespace, each "
    "agent held to its own Leases by an admission policy on the pod name its token carries, "
    "instead of RBAC per job). Tried before and not kept: orjson decoding kopf's watch events, "
    "16 or 32 API threads instead of 64."
)
"""Where the 1 000-job pass's creation time goes, measured beside the published runs."""


def _storm_per_job(s: Figures) -> str:
    """Each hit job's time to Running again, where the run timed each job."""
    if "storm_job_p99" not in s:
        return ""
    return f"{s['storm_job_p50']:.1f} / {s['storm_job_p99']:.1f} s, "


def _storm_timeline(s: Figures) -> list[str]:
    """Where a hit job's way back goes (`bench/storm.py`), where the run timed its stages."""
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
        lines += ["", "Once every job ran, simulated agents (`bench/agent_fleet.py`, the agent's "
                  "own protocol) reported for every pod (settled in "
                  f"{last['agents_settled']:.1f} s at {last['jobs']} jobs, before the storm): the "
                  "storm's surviving pods restart in place, as the agent's pods do on a cluster, "
                  "and only the lost ones are created again."]  # fmt: skip
        if last.get("fleet_heartbeats"):
            lines[-1] += (" Each epoch's rank 0 writes its heartbeat once, with a first step; "
                          "the jobs set hangTimeoutSeconds and startupTimeoutSeconds past the run "
                          "(`bench.controlplane.AGENTS_LATE_SECONDS`).")  # fmt: skip
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
