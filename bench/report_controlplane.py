"""The report's control-plane section (`bench.controlplane`): TrainingJobs by the thousand on
the real API server, kube-scheduler and kwok nodes, a failure storm, and where the time goes."""

from __future__ import annotations

from typing import Any

from bench import targets_controlplane
from bench.report_format import pct as _pct

Figures = dict[str, Any]
TOP_VERBS = 10


CREATION_NOTE = (
    "Why the pods come later than the kube Job controller's (side runs of the 1 000-job pass "
    "alone, to the last pod created, at 5e8acfe and ac59105 on this machine): both systems "
    "saturate the 2 cores, so the difference is work. Phalanx's 131 s took 253 CPU-seconds "
    "(kube-apiserver 93, the operator 78, kube-scheduler 47, kwok 20, etcd 10, the rest "
    "kube-controller-manager); the Job controller's 79 s, kube-apiserver 82 and "
    "kube-controller-manager 14. The operator spends about 10 ms of CPU per pod: each pod "
    "reaches it as 3.4 watch events of 7 to 8 kB (created, bound, Running; 8 221 of its 10 098 "
    "events at 300 jobs), each decoded, run through kopf's event processing and the pod index, "
    "and each waking the job's reconcile. It also sends 11 to 12 requests per job beside the pods "
    "(ServiceAccount, Role, RoleBinding, Service, two Leases, PodDisruptionBudget, an Event, "
    "kopf's finalizer patch, two to three status writes), each a write the API server and etcd "
    "make and send to their watchers. Kept: kopf's diff base built without copying the spec (7 % "
    "of the operator's CPU in a GIL profile at 300 jobs) and a job's six children created at "
    "once; neither moved the time beyond the runs' spread (5e8acfe twice: 131 and 149 s; "
    "ac59105 in a published run: 146 s; bbb4e32, which also fixes glibc's mmap threshold: 174 s "
    "published, 151 s in a side run; that threshold's cost, 40 000 more page faults at 300 "
    "jobs, is about 0.2 s of CPU). Tried and not kept: orjson decoding kopf's watch "
    "events (twice as fast alone; in the loaded operator its 9 956 decodes took 8.6 s, json's "
    "9 894 7.5 s); 16 or 32 API threads instead of 64 (peak RSS 250 / 271 MiB, pods created in "
    "185 / 171 s, one run each; 64 threads, in a run that also decoded with orjson: 275 MiB, "
    "154 s). What would close it: an operator whose cost per pod event is a "
    "client-go informer's (compiled, or kopf bypassed for the pod watch), and fewer objects per "
    "job (one ServiceAccount, Role and RoleBinding per namespace, each agent held to its own "
    "Leases by an admission policy on the pod name its token carries, instead of RBAC per job)."
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
                  + ". `<module>` and `main` are the event loop's thread (kopf's watches, "
                  "indices and handlers); the executor's threads run `execute`."]  # fmt: skip
    return lines
