"""Real faults, injected the way they happen: a process SIGKILLed or SIGSTOPped inside a pod (as
the OOM killer or a stuck NCCL call would), a pod deleted, a node's container stopped."""

from __future__ import annotations

import subprocess

from kubernetes import client as k8s

from tests.e2e.cluster import KindCluster, run

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


_FIND_POD_CGROUP = r"""
found=
for root in $roots; do
  found=$(find "$root" -maxdepth 6 -type d \( -name "*pod$uid*" -o -name "*pod$(echo "$uid" | tr - _)*" \) \
          2>/dev/null | awk '{ print length, $0 }' | sort -n | head -1 | cut -d' ' -f2-)
  [ -n "$found" ] && break
done
[ -n "$found" ] || { echo "no cgroup for pod $uid" >&2; exit 1; }
"""
"""The pod `$uid`'s cgroup directory in `$found`: the shallowest match under the first of
`$roots` (a cgroup v1 controller's hierarchy, then v2's unified one) that has it."""


# The pod's CPU quota (its cgroup's CFS bandwidth) set to `cpus`, or lifted (`max`): cgroup v1's
# cpu.cfs_quota_us, else v2's cpu.max.
_POD_CGROUP = (
    r"""
uid=$1; cpus=$2; roots="/sys/fs/cgroup/cpu /sys/fs/cgroup"
"""
    + _FIND_POD_CGROUP
    + r"""if [ -f "$found/cpu.cfs_quota_us" ]; then
  period=$(cat "$found/cpu.cfs_period_us")
  if [ "$cpus" = max ]; then echo -1; else awk -v c="$cpus" -v p="$period" 'BEGIN { printf "%d", c * p }'; fi \
    > "$found/cpu.cfs_quota_us"
else
  if [ "$cpus" = max ]; then echo "max 100000"; else awk -v c="$cpus" 'BEGIN { printf "%d 100000", c * 100000 }'; fi \
    > "$found/cpu.max"
fi
"""
)
_THROTTLED: list[tuple[str, str]] = []


_POD_FREEZE = (
    r"""
uid=$1; state=$2; roots="/sys/fs/cgroup/freezer /sys/fs/cgroup"
"""
    + _FIND_POD_CGROUP
    + r"""if [ -f "$found/freezer.state" ]; then echo "$state" > "$found/freezer.state"
elif [ "$state" = FROZEN ]; then echo 1 > "$found/cgroup.freeze"; else echo 0 > "$found/cgroup.freeze"; fi
"""
)


def freeze_pod(pod: k8s.V1Pod, frozen: bool = True) -> None:
    """Every process of the pod stopped (`frozen`) or going again, through its cgroup's freezer
    (v1 or v2), as on a paused VM or a machine stalled for a while: nothing ends, no signal is
    seen, the pod stays Running."""
    node, uid = str(pod.spec.node_name), str(pod.metadata.uid)
    state = "FROZEN" if frozen else "THAWED"
    run(["docker", "exec", node, "sh", "-c", _POD_FREEZE, "freeze", uid, state])


def throttle_pod(pod: k8s.V1Pod, cpus: float) -> None:
    """The pod's CPU quota (its cgroup's CFS bandwidth, as a CPU limit sets it) cut to `cpus`,
    until `release_stalls`: every process of the pod, its agent too, runs at most that share,
    and none is ever stopped (as on a throttled or overcommitted machine; a stopped process
    would be a frozen one, a Hang)."""
    node, uid = str(pod.spec.node_name), str(pod.metadata.uid)
    run(["docker", "exec", node, "sh", "-c", _POD_CGROUP, "throttle", uid, str(cpus)])
    _THROTTLED.append((node, uid))


def release_stalls() -> None:
    """End the tracers `stall_worker` started (their workers go on, if alive), and lift the
    CPU quotas `throttle_pod` set (on pods that still exist)."""
    while _THROTTLED:
        node, uid = _THROTTLED.pop()
        run(["docker", "exec", node, "sh", "-c", _POD_CGROUP, "release", uid, "max"], check=False)
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
