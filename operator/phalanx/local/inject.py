"""Apply due faults to the local cluster: SIGKILL a node (and lose the machine), SIGKILL one
worker rank, or SIGSTOP a node so that it hangs.

A fault that finds no running target (the gang is between epochs) waits for the next tick, so it
always strikes a running gang and its time is the moment it really struck.
"""

from __future__ import annotations

import signal
from datetime import datetime

from phalanx.local import processes
from phalanx.local.cluster import LocalCluster, LocalPod
from phalanx.local.faults import Fault
from phalanx.local.summary import InjectedFault
from phalanx.models.job import TrainingJob


def target(cluster: LocalCluster, job: TrainingJob, fault: Fault) -> LocalPod | None:
    """The running node pod the fault hits, if there is one now."""
    status = job.status
    if status is None or status.phase != "Running":
        return None
    if fault.kind == "kill-rank" and fault.rank is not None:
        node_rank = fault.rank // job.spec.nproc_per_node
    else:
        node_rank = fault.node_rank if fault.node_rank is not None else status.nodes - 1
    pod = cluster.pod_of(status.epoch, node_rank)
    return pod if pod is not None and pod.alive and pod.deleting_since is None else None


def strike(
    cluster: LocalCluster, job: TrainingJob, fault: Fault, now: datetime
) -> InjectedFault | None:
    """Inject `fault` now; None when it has no target yet (try again later)."""
    pod = target(cluster, job, fault)
    if pod is None or pod.process is None:
        return None
    record = InjectedFault(kind=fault.kind, time=now, pod=pod.name, node=pod.node, epoch=pod.epoch)
    match fault.kind:
        case "kill-node":
            if fault.lose_node and pod.node is not None:
                cluster.lose_node(pod.node, f"node {pod.node} lost (injected: kill-node)")
            else:
                cluster.kill(pod, f"node {pod.node} processes killed (injected: kill-node)")
        case "kill-rank":
            assert fault.rank is not None
            report = pod.agent()
            pid = report.workers.get(str(fault.rank)) if report is not None else None
            if pid is None or not processes.kill_pid(pid):
                return None
            record.rank = fault.rank
        case "hang-node":
            processes.signal_tree(pod.process.pid, signal.SIGSTOP)
    return record


def describe(record: InjectedFault) -> str:
    what = {
        "kill-node": "SIGKILLed the node",
        "kill-rank": f"SIGKILLed worker rank {record.rank} on",
        "hang-node": "SIGSTOPped the node",
    }[record.kind]
    return f"{what} {record.node} ({record.pod})"
