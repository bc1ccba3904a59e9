"""Apply due faults to the local cluster: SIGKILL a node (and lose the machine), SIGKILL one
worker rank, SIGSTOP a node so that it hangs, or throttle a node's CPU so that it straggles.

A fault that finds no running target (the gang is between epochs) waits for the next tick, so it
always strikes a running gang and its time is the moment it really struck. A fault aimed at a
start-up phase is armed in the run's fault directory instead, and struck by the worker that
enters the phase (see phalanx.phases); `finish_struck` applies the rest to its node.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from pathlib import Path

from phalanx.local import processes
from phalanx.local.cluster import LocalCluster, LocalPod
from phalanx.local.faults import Fault
from phalanx.local.summary import InjectedFault
from phalanx.models import env
from phalanx.models.env import FAULT_ARMED_SUFFIX as ARMED_SUFFIX
from phalanx.models.env import FAULT_STRUCK_SUFFIX as STRUCK_SUFFIX
from phalanx.models.job import TrainingJob


def target(cluster: LocalCluster, job: TrainingJob, fault: Fault) -> LocalPod | None:
    """The running node pod the fault hits, if there is one now."""
    status = job.status
    if status is None or status.phase != "Running":
        return None
    if fault.kind in ("kill-rank", "hang-rank") and fault.rank is not None:
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
            pid = _worker(pod, fault)
            if pid is None or not processes.kill_pid(pid):
                return None
            record.rank = fault.rank
        case "hang-rank":
            pid = _worker(pod, fault)
            if pid is None:
                return None
            processes.signal_tree(pid, signal.SIGSTOP)
            record.rank = fault.rank
        case "hang-node":
            processes.signal_tree(pod.process.pid, signal.SIGSTOP)
        case "slow-node":
            if pod.node is None:
                return None
            cluster.slow_node(pod.node, fault.slowdown)
        case "drain-node":
            if pod.node is None:
                return None
            cluster.cordon(pod.node, "cordoned (injected: drain-node)")
    return record


def _worker(pod: LocalPod, fault: Fault) -> int | None:
    """The pid of the fault's worker rank in `pod`, from its agent's report, else by env."""
    assert fault.rank is not None
    assert pod.process is not None
    report = pod.agent()
    pid = report.workers.get(str(fault.rank)) if report is not None else None
    if pid is None:  # no agent (torchrun or the script as the command): find it by env
        pid = processes.find_by_env(pod.process.pid, env.RANK, str(fault.rank))
    return pid


def describe(record: InjectedFault) -> str:
    what = {
        "kill-node": "SIGKILLed the node",
        "kill-rank": f"SIGKILLed worker rank {record.rank} on",
        "hang-node": "SIGSTOPped the node",
        "hang-rank": f"SIGSTOPped worker rank {record.rank} on",
        "slow-node": "throttled the CPU of the node",
        "drain-node": "cordoned, to drain it, the node",
    }[record.kind]
    where = f"{what} {record.node} ({record.pod})"
    return where + (f" as it entered {record.phase}" if record.phase else "")


def arm(directory: Path, index: int, fault: Fault) -> None:
    """Arm a phase fault for the workers to strike (see phalanx.phases)."""
    directory.mkdir(parents=True, exist_ok=True)
    body = {"kind": fault.kind, "phase": fault.phase, "nodeRank": fault.node_rank,
            "rank": fault.rank}  # fmt: skip
    tmp = directory / f".{index}.tmp"
    tmp.write_text(json.dumps(body))
    tmp.replace(directory / f"{index}{ARMED_SUFFIX}")


def finish_struck(cluster: LocalCluster, directory: Path) -> list[InjectedFault]:
    """Phase faults a worker struck since the last look: stop or kill the rest of its node, as
    the fault says, and return what struck, when and where."""
    records = []
    for path in sorted(directory.glob(f"*{STRUCK_SUFFIX}")):
        try:
            struck = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "time" not in struck:
            continue  # claimed, not yet recorded: next tick
        path.rename(path.with_suffix(".done"))
        pod = cluster.pods.get(str(struck.get("pod")))
        kind = struck["kind"]
        if pod is not None and pod.process is not None:
            if kind == "hang-node":
                processes.signal_tree(pod.process.pid, signal.SIGSTOP)
            elif kind == "kill-node" and pod.node is not None:
                cluster.lose_node(pod.node, f"node {pod.node} lost (injected: kill-node)")
        records.append(
            InjectedFault(
                kind=kind,
                time=datetime.fromtimestamp(struck["time"], UTC),
                pod=str(struck.get("pod")),
                node=pod.node if pod else None,
                epoch=int(struck.get("epoch", 0)),
                rank=struck.get("rank"),
                phase=struck.get("phase"),
            )
        )
    return records
