"""The report's large-job section (`bench.controlplane.large_job`): one TrainingJob of 2 000 node pods on
kwok, created beside the kube Job controller's 2 000-completion Indexed Job, and its in-place
restart fanned out to a fleet of simulated agents. Also what `python -m bench.controlplane.large_job --out`
writes, so the side file and the report say the same."""

from __future__ import annotations

from typing import Any

Figures = dict[str, Any]

FLEET_NOTE = (
    "The agents are simulated (`bench/controlplane/agent_fleet.py`): one process follows the job's "
    "assignment Lease and writes each pod's reports as the agent's own `LeaseReports` writes "
    "them (its report Lease shard, a merge patch of its own annotation, the pods' service-account "
    "token) from 64 threads that keep their connections (a real agent opens one per request, so "
    "the API server's TLS handshakes are spared here), two per pod and epoch (`starting`, the acknowledgement, then `training` 1 s later){beat}; "
    "a real agent also writes `rendezvous`, `loading` and `first-step`. One failure: one pod's "
    "agent reports its worker killed. Fan-out: the new epoch's assignment reaching the fleet -> "
    "the last pod's acknowledgement written. CPU: the seconds each process used from the "
    "failure to the last acknowledgement, on this machine's 2 cores. The fleet starts with the "
    "job, so each pod's agent reports as soon as kwok runs it (kwok moves 32 pods on at once): "
    "the creation and Running figures carry two writes per pod that the Indexed Job's pods do "
    "not make, as on a cluster where the agents start with their pods."
)
HEARTBEAT_NOTE = (
    ", and the epoch's rank 0 its heartbeat once, with a first step (a real one renews it every "
    "2 s; the job sets hangTimeoutSeconds past the run instead)"
)
"""What runs since the fleet writes rank 0's heartbeat (`fleet_heartbeats` in their figures) add
to `FLEET_NOTE`; the runs before wrote none."""


WHERE_THE_TIME_GOES = (
    "Where the restart's time goes (a side run at f1155f4, 2 000 pods, fan-out 12.3 s; "
    "kube-apiserver sampled by its own pprof for 10 s from the failure): the machine is "
    "saturated (kube-apiserver 12.6 CPU-s, the operator 6.6, the fleet 1.8, etcd 1.6 in about "
    "12 s on 2 cores). 65 % of the API server's samples are the agents' merge patches "
    "(GuaranteedUpdate: applying the JSON merge patch 17 %, managedFields bookkeeping 18 %, "
    "JSON decoding and encoding of the Lease), about 3 ms of its CPU a write; each pod writes "
    "twice an epoch here (a real agent five times or more: each start-up phase, and renewals). What would close it: one write per "
    "pod per epoch (phases after the acknowledgement folded into it or into rank 0's heartbeat), "
    "or one acknowledgement for many pods (node rank 0's agent already hears every peer, "
    "`phalanx.agent.peers`), or an API server with cores of its own. Creating the pods: they "
    "are Phalanx's (13 variables of their own, the job's others from its ConfigMap since cbc249a; "
    "a /dev/shm volume; a spread over nodes), and the job's 1 993 report Leases (one "
    "per rank past the first 8, `phalanx.models.report_shards`) are created before them: 4 000 "
    "creates against the Indexed Job's 2 000. The Job controller made the same pods, with a "
    "headless Service, in the time shown above. Side runs of this pass: 33.7 s published before "
    "672b5e7, 29.9 s once the operator watched pods itself and sent its creates as JSON, 25.7 s "
    "once a large plan's creates went in a window of 32 in flight instead of batches of 32 that "
    "each waited for their slowest answer. What would close the rest: fewer report Leases (a "
    "Lease per 2 ranks halves them, for a slower restart: fan-out 4.7 s against 3.5 s, "
    "`report_shards`), and smaller pods (see the control-plane section)."
)


def section(figures: Figures) -> list[str]:
    """The section's lines."""
    ack = figures["acknowledged"]
    base = figures.get("baseline")
    created = f"{figures['all_created']:.1f} s"
    if base is not None:
        created += (f" (kube Job controller, {base['pods']}-completion Indexed Job: "
                    f"{base['all_created']:.1f} s, {figures['created_ratio']:.2f}x)")  # fmt: skip
    alike = figures.get("baseline_same_pods")
    if alike is not None:
        created += (f"; the same Indexed Job of Phalanx's pods with a headless Service and env ConfigMap: "
                    f"{alike['all_created']:.1f} s, "
                    f"{figures['all_created'] / alike['all_created']:.2f}x")  # fmt: skip
    running = f"{figures['all_running']:.1f} s"
    if base is not None:
        running += f" (Job controller: {base['all_running']:.1f} s)"
    fan_out = figures["fan_out"]
    cpu = ", ".join(f"{name} {seconds:.1f} s"
                    for name, seconds in figures.get("restart_cpu_seconds", {}).items())  # fmt: skip
    rows = [
        ("pods created", created),
        ("pods Running", running),
        ("job Running (every agent acknowledged epoch 1)", f"{figures['job_running']:.1f} s"),
        ("fan-out of the restart: all acknowledged",
         f"{fan_out:.1f} s" if fan_out is not None
         else f"not complete: {ack['acknowledged']} of {ack['pods']}"),
        ("acknowledgements p50 / p90", f"{ack.get('p50', 0):.1f} s / {ack.get('p90', 0):.1f} s"),
        ("failure reported -> job Running again", f"{figures['restart_running_again']:.1f} s"),
        ("pods created by the restart", str(figures["restart_new_pods"])),
        ("epochs after the failure", str(figures["restart_epoch"] - 1)),
        ("operator requests in the restart", str(figures["restart_api_requests"])),
        ("CPU in the restart", cpu or "-"),
        ("operator peak RSS", f"{figures['peak_rss_mib']:.0f} MiB"),
        ("fleet writes that failed", str(figures["fleet_error_count"])),
    ]  # fmt: skip
    return [
        f"## One large job (kwok): {figures['pods']} node pods and an in-place restart", "",
        "| | |", "| --- | --- |", *(f"| {what} | {value} |" for what, value in rows), "",
        FLEET_NOTE.format(beat=HEARTBEAT_NOTE if figures.get("fleet_heartbeats") else ""), "", WHERE_THE_TIME_GOES, "",
    ]  # fmt: skip
