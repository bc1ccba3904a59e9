"""Lifelines: a process that Phalanx starts ends when the process that started it dies, however
it dies.

Why the kernel does it: a SIGKILLed agent (or `phalanx run`) runs no handler and no `finally`, so
it cannot stop what it started; left alone, its workers go on training, holding ports, memory and
GPUs, and the pod's restart meets them. Linux's `prctl(PR_SET_PDEATHSIG)` asks the kernel to send
a process a signal when its parent dies. Two catches:

- The signal follows the parent *thread* that started the process, not the whole process: only a
  main thread may start a process that relies on it (the agent spawns workers from its main
  thread, the multiprocessing fork server forks from its own).
- The parent may die between the fork and the call; then nothing would ever come. `exit_if_gone`
  (and the check in `die_with_parent_hook`) closes that window.

Through ctypes because the call is one libc function, not worth a dependency. Elsewhere than
Linux there is no such call: these functions do nothing, and the parent's own cleanup is all there
is. A process a worker starts itself is its own to stop (torch's DataLoader workers watch their
parent, for one).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from phalanx.models import exits

PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""
ORPHAN_EXIT = exits.SIGNAL_BASE + signal.SIGKILL
"""The exit code of a process that finds its parent gone: as if the parent's death reached it."""

Prctl = Callable[[int, int, int, int, int], int]


@functools.cache
def _prctl() -> Prctl | None:
    """libc's prctl, looked up once; None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    function.restype = ctypes.c_int
    prctl: Prctl = function
    return prctl


def die_with_parent(signum: int = signal.SIGKILL) -> bool:
    """Have the kernel send this process `signum` when its parent (thread) dies. False where
    there is no such call; OSError if the kernel refuses it."""
    prctl = _prctl()
    if prctl is None:
        return False
    if prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")
    return True


def die_with_parent_hook(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen`: the child gets `signum` when this process dies, and
    exits at once if it died already. libc's function is looked up here, in the parent, so that the
    child, between its fork and its exec, only calls it. None where there is no such call."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        if os.getppid() != parent:  # re-parented: the parent died before the call
            os._exit(ORPHAN_EXIT)

    return hook


def alive(pid: int) -> bool:
    """Whether process `pid` runs. One that has exited but is not reaped yet (a zombie) is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return not Path("/proc/self/stat").exists()  # with a /proc, it is gone since the kill
    except OSError:
        return True  # /proc hides it: trust the kill
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def exit_if_gone(pid: int) -> None:
    """Exit at once if process `pid` (the one whose death should end this one) is gone already:
    it died before `die_with_parent` took effect. Call it right after that, before any work."""
    if not alive(pid):
        print(
            f"phalanx: process {pid}, whose death ends this one, is gone: exiting", file=sys.stderr
        )
        sys.stderr.flush()
        os._exit(ORPHAN_EXIT)
