"""What the pod's environment gives its agent: a directory in host memory for the workers'
snapshots, where node rank 0's heartbeat goes, the assignment channel, the workers' PYTHONPATH when
the agent was injected, and the pod's termination message. Read here once, so that `main`'s
`Agent` is about running epochs, not about where things are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from phalanx.agent.channel import Assignments, FileAssignments, FileReports, Reports
from phalanx.agent.kubeapi import KubeError
from phalanx.agent.lease_channel import LeaseAssignments, LeaseReports
from phalanx.agent.sinks import FileSink, HeartbeatSink, LeaseSink
from phalanx.models import env as contract
from phalanx.pod import PodEnv

SHARED_MEMORY = Path("/dev/shm")


def memory_directory() -> Path | None:
    """The pod's directory in host memory for its workers' memory snapshots: the one its env
    names (the local backend gives each pod one), else a new one under /dev/shm (a Memory
    emptyDir in the operator's pods); None where there is no tmpfs (snapshots are then off)."""
    if named := os.environ.get(contract.PHALANX_CHECKPOINT_MEMORY_DIR):
        path = Path(named)
        path.mkdir(parents=True, exist_ok=True)
        return path
    if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="phalanx-memory-", dir=SHARED_MEMORY))
    return None


def heartbeat_sink(pod: PodEnv) -> HeartbeatSink | None:
    """Node rank 0 publishes; to a file when asked (local), else to the job's Lease."""
    if pod.node_rank != 0:
        return None
    if path := os.environ.get(contract.PHALANX_HEARTBEAT_FILE):
        return FileSink(Path(path))
    if pod.heartbeat_lease and pod.namespace and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return LeaseSink(pod.namespace, pod.heartbeat_lease, os.environ.get("HOSTNAME", "agent"))
    return None


def injected_path(base: dict[str, str]) -> dict[str, str]:
    """PYTHONPATH for the workers when this agent runs from its zipapp (injected into an image
    without Phalanx, see `bundle`): the zip first, so every worker, a plain subprocess too,
    imports `phalanx.progress` from it without a pip install."""
    archive = Path(__file__).parents[2]  # <zip>/phalanx/agent/pod_setup.py
    if not archive.is_file():
        return {}
    rest = base.get("PYTHONPATH")
    return {"PYTHONPATH": f"{archive}{os.pathsep}{rest}" if rest else str(archive)}


def write_termination_message(message: str) -> None:
    path = Path(os.environ.get(contract.PHALANX_TERMINATION_LOG, "/dev/termination-log"))
    with contextlib.suppress(OSError):  # not in a pod: the message is on stderr too
        path.write_text(message[:4000])


def channel(name: str) -> tuple[Assignments, Reports] | None:
    """The assignment channel the pod's env names: the run's files (local backend), the job's
    Leases (a cluster, with the pod's service account), or none."""
    assignment_file = os.environ.get(contract.PHALANX_ASSIGNMENT_FILE)
    report_file = os.environ.get(contract.PHALANX_AGENT_REPORT_FILE)
    if assignment_file and report_file:
        return FileAssignments(Path(assignment_file)), FileReports(Path(report_file))
    namespace = os.environ.get(contract.PHALANX_NAMESPACE)
    assignment = os.environ.get(contract.PHALANX_ASSIGNMENT_LEASE)
    heartbeat = os.environ.get(contract.PHALANX_HEARTBEAT_LEASE)
    if not (namespace and assignment and heartbeat and os.environ.get("KUBERNETES_SERVICE_HOST")):
        return None
    if not os.environ.get(contract.PHALANX_POD_NAME):
        return None  # a pod not built by the operator cannot be named in an assignment
    try:
        return LeaseAssignments(namespace, assignment), LeaseReports(namespace, heartbeat)
    except KubeError as error:  # no token mounted: run the one epoch, as before
        print(f"phalanx-agent: no assignment channel ({error}); one epoch only", file=sys.stderr)
        return None
