"""Signals to whole process trees: a local node is an agent plus its workers, and the workers run
in their own sessions (so one process group signal does not reach them all).

Why psutil: the children must be collected while the agent is alive (orphans are re-parented to
init and no longer found), and a run's leftovers are swept by an env marker at exit.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

RUN_MARKER_ENV = "PHALANX_LOCAL_RUN"
"""Every process a local run starts carries this variable, so the run can sweep its leftovers."""


def tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants (empty if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def signal_tree(pid: int, signum: signal.Signals) -> int:
    """Send `signum` to the process and its descendants; returns how many were signalled."""
    sent = 0
    for process in tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.send_signal(signum)
            sent += 1
    return sent


def find_by_env(pid: int, name: str, value: str) -> int | None:
    """The process of `pid`'s tree whose env sets `name` to `value` and whose parent does not
    (a worker that torchrun started with RANK=3, not the helpers it forked in turn); None if
    there is none."""
    matches: dict[int, int] = {}
    for process in tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            if process.environ().get(name) == value:
                matches[process.pid] = process.ppid()
    return next((child for child, parent in matches.items() if parent not in matches), None)


def kill_pid(pid: int) -> bool:
    """SIGKILL one process; False if it is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def sweep(run_id: str) -> int:
    """SIGKILL every process of this user still marked with run `run_id`; returns the count."""
    killed = 0
    me = os.getpid()
    for process in psutil.process_iter(["pid", "uids"]):
        if process.pid == me:
            continue
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            if process.environ().get(RUN_MARKER_ENV) == run_id:
                process.send_signal(signal.SIGCONT)
                process.kill()
                killed += 1
    return killed
