"""Real faults, injected the way they happen: a process SIGKILLed or SIGSTOPped inside a pod (as
the OOM killer or a stuck NCCL call would), a pod deleted, a node's container stopped."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.e2e.cluster import KindCluster

# Runs inside the trainer container: signal every worker process (the agent is PID 1). A worker
# is a process whose command line ends with the program, or, for the agent's warm workers, a
# child of its multiprocessing fork server (a fork keeps the server's command line).
_SIGNAL_WORKERS = """
import os, signal, sys
sig = getattr(signal, sys.argv[1])
def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
    except OSError:
        return []
def parent(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return ""
hit = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) in (1, os.getpid()):
        continue
    own = cmdline(pid)
    forked = any(b"forkserver" in part for part in cmdline(parent(pid)))
    if forked or any(part.endswith(sys.argv[2].encode()) for part in own):
        os.kill(int(pid), sig)
        hit.append(pid)
print(" ".join(hit))
sys.exit(0 if hit else 1)
"""


def signal_workers(
    kind: KindCluster, pod: k8s.V1Pod, signal: str, program: str, python: str = "python"
) -> str:
    """Send `signal` to the pod's worker processes whose command line ends with `program`
    (found by the image's `python`)."""
    done = kind.kubectl("exec", "-n", pod.metadata.namespace, pod.metadata.name, "--",
                        python, "-c", _SIGNAL_WORKERS, signal, program)  # fmt: skip
    return done.stdout.strip()


def kill_worker(kind: KindCluster, pod: k8s.V1Pod) -> None:
    signal_workers(kind, pod, "SIGKILL", "phalanx.trainer.train")


def hang_worker(kind: KindCluster, pod: k8s.V1Pod) -> None:
    signal_workers(kind, pod, "SIGSTOP", "phalanx.trainer.train")


def delete_pod(kind: KindCluster, pod: k8s.V1Pod) -> None:
    kind.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)


def lose_node(kind: KindCluster, pod: k8s.V1Pod) -> None:
    kind.stop_node(pod.spec.node_name)
