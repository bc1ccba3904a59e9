"""The report's large-job section (`bench.large_job`): one TrainingJob of 2 000 node pods on
kwok, created beside the kube Job controller's 2 000-completion Indexed Job, and its in-place
restart fanned out to a fleet of simulated agents. Also what `python -m bench.large_job --out`
writes, so the side file and the report say the same."""

from __future__ import annotations

from typing import Any

Figures = dict[str, Any]

FLEET_NOTE = (
    "The agents are simulated (`bench/agent_fleet.py`): one process follows the job's "
    "assignment Lease and writes each pod's reports as the agent's own `LeaseReports` writes "
    "them (its report Lease shard, a merge patch of its own annotation, the pods' service-account "
    "token), two per pod and epoch (`starting`, the acknowledgement, then `training` 1 s later); "
    "a real agent also writes `rendezvous`, `loading` and `first-step`. One failure: one pod's "
    "agent reports its worker killed. Fan-out: the new epoch's assignment reaching the fleet -> "
    "the last pod's acknowledgement written. CPU: the seconds each process used from the "
    "failure to the last acknowledgement, on this machine's 2 cores."
)


def section(figures: Figures) -> list[str]:
    """The section's lines."""
    ack = figures["acknowledged"]
    base = figures.get("baseline")
    created = f"{figures['all_created']:.1f} s"
    if base is not None:
        created += (f" (kube Job controller, {base['pods']}-completion Indexed Job: "
                    f"{base['all_created']:.1f} s, {figures['created_ratio']:.2f}x)")  # fmt: skip
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
        FLEET_NOTE, "",
    ]  # fmt: skip
