"""The kernel's OOM kills in this pod's memory cgroup, counted (standard library only).

Why: the OOM killer picks the biggest process of the cgroup that hit its limit, and that is a
worker, not the agent (the pod's PID 1): the container keeps running, so Kubernetes never says
OOMKilled, and the worker's death looks like any SIGKILL. The memory cgroup counts its OOM kills
(`oom_kill` in cgroup v2's memory.events, in cgroup v1's memory.oom_control since Linux 4.13):
a worker that died of SIGKILL while that count grew was killed for memory.
"""

from __future__ import annotations

from pathlib import Path

COUNTERS = (
    Path("/sys/fs/cgroup/memory.events"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.oom_control"),  # cgroup v1
)


def oom_kills(counters: tuple[Path, ...] = COUNTERS) -> int | None:
    """The pod's memory cgroup's OOM kill count, or None where no counter can be read."""
    for path in counters:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def grew(since: int | None, counters: tuple[Path, ...] = COUNTERS) -> bool:
    """Whether the count grew since `since` (False where it cannot be read)."""
    now = oom_kills(counters)
    return since is not None and now is not None and now > since
