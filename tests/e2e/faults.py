"""Real faults, injected the way they happen: a process SIGKILLed or SIGSTOPped inside a pod (as
the OOM killer or a stuck NCCL call would), a pod deleted, a node's container stopped."""

from __future__ import annotations

import subprocess

from kubernetes import client as k8s

from tests.e2e.cluster import KindCluster

# Runs inside the trainer container: the worker processes (the agent is PID 1). A worker is a
# process whose command line ends with the program, or, for the agent's warm workers, a child of
# its multiprocessing fork server (a fork keeps the server's command line).
_FIND_WORKERS = """
import os, sys
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
def workers(program):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in (1, os.getpid(), os.getppid()):
            continue
        forked = any(b"forkserver" in part for part in cmdline(parent(pid)))
        if forked or any(part.endswith(program.encode()) for part in cmdline(pid)):
            found.append(int(pid))
    return found
"""
# Signal every worker.
_SIGNAL_WORKERS = (
    _FIND_WORKERS
    + """
import signal
hit = workers(sys.argv[2])
for pid in hit:
    os.kill(pid, getattr(signal, sys.argv[1]))
print(" ".join(map(str, hit)))
sys.exit(0 if hit else 1)
"""
)
# Stall every worker while it stays alive, as a hung kernel or a stuck collective does: attached
# with ptrace, a worker stops in a tracing stop ('t', not the 'T' of SIGSTOP that its agent
# watches for) and stays there; SIGKILL still ends it. The tracer holds it until it dies or
# `seconds` pass (then the worker goes on).
_STALL_WORKERS = (
    _FIND_WORKERS
    + """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, WALL = 16, 0x40000000
held = [pid for pid in workers(sys.argv[1]) if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0]
print(" ".join(map(str, held)), flush=True)
deadline = time.monotonic() + float(sys.argv[2])
while held and time.monotonic() < deadline:
    pid, status = os.waitpid(-1, WALL | os.WNOHANG)
    if pid == 0:
        time.sleep(0.1)
    elif os.WIFEXITED(status) or os.WIFSIGNALED(status):
        held.remove(pid)
sys.exit(0)
"""
)


def signal_workers(
    kind: KindCluster, pod: k8s.V1Pod, signal: str, program: str, python: str = "python"
) -> str:
    """Send `signal` to the pod's worker processes whose command line ends with `program`
    (found by the image's `python`)."""
    done = kind.kubectl("exec", "-n", pod.metadata.namespace, pod.metadata.name, "--",
                        python, "-c", _SIGNAL_WORKERS, signal, program)  # fmt: skip
    return done.stdout.strip()


_STALLS: list[subprocess.Popen[str]] = []
"""Tracers holding stalled workers, ended by `release_stalls` (or when their workers die)."""


def stall_worker(kind: KindCluster, pod: k8s.V1Pod, seconds: float = 300) -> None:
    """Every worker of the pod stops making progress while it stays alive (module comments)."""
    tracer = kind.kubectl_popen("exec", "-n", pod.metadata.namespace, pod.metadata.name, "--",
                                "python", "-c", _STALL_WORKERS, "phalanx.trainer.train",
                                str(seconds))  # fmt: skip
    _STALLS.append(tracer)
    held = tracer.stdout.readline().strip() if tracer.stdout else ""
    if not held:
        _, errors = tracer.communicate(timeout=30)
        raise AssertionError(f"no worker of {pod.metadata.name} could be stalled: {errors}")


# Slow every process of a container but this one, as a CPU quota does to a whole machine: each
# 0.1 s period they run for `share` of it and are stopped for the rest (SIGSTOP/SIGCONT), until
# `seconds` pass or the container goes. Unlike a CFS quota, it slows work that sleeps in short
# slices too (the reference trainer's emulated compute: phalanx.trainer.emulated).
_SLOW_CONTAINER = """
import os, signal, sys, time
share, deadline = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
me = os.getpid()
def others():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
def send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
print("slowed", flush=True)
try:
    while time.monotonic() < deadline:
        pids = others()
        send(pids, signal.SIGSTOP)
        time.sleep(0.1 * (1 - share))
        send(pids, signal.SIGCONT)
        time.sleep(0.1 * share)
finally:
    send(others(), signal.SIGCONT)
"""


def slow_pod(kind: KindCluster, pod: k8s.V1Pod, share: float, seconds: float = 300) -> None:
    """The pod's processes (its agent and workers) get `share` of the time, as on a throttled
    machine, for `seconds` or until `release_stalls`."""
    slower = kind.kubectl_popen("exec", "-n", pod.metadata.namespace, pod.metadata.name, "--",
                                "python", "-c", _SLOW_CONTAINER, str(share), str(seconds))  # fmt: skip
    _STALLS.append(slower)
    started = slower.stdout.readline().strip() if slower.stdout else ""
    if started != "slowed":
        _, errors = slower.communicate(timeout=30)
        raise AssertionError(f"{pod.metadata.name} could not be slowed: {errors}")


def release_stalls() -> None:
    """End the tracers `stall_worker` started (their workers go on, if alive)."""
    while _STALLS:
        tracer = _STALLS.pop()
        tracer.terminate()
        try:
            tracer.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            tracer.kill()
            tracer.communicate()


def kill_worker(kind: KindCluster, pod: k8s.V1Pod) -> None:
    signal_workers(kind, pod, "SIGKILL", "phalanx.trainer.train")


def hang_worker(kind: KindCluster, pod: k8s.V1Pod) -> None:
    signal_workers(kind, pod, "SIGSTOP", "phalanx.trainer.train")


def delete_pod(kind: KindCluster, pod: k8s.V1Pod) -> None:
    kind.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)


def lose_node(kind: KindCluster, pod: k8s.V1Pod) -> None:
    kind.stop_node(pod.spec.node_name)
