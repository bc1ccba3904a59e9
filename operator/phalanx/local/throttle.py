"""CPU throttling of a local node: its processes get a fraction of the CPU, as a CPU quota or a
noisy neighbour would leave them (`phalanx run --slow-node-at`).

Why stop/continue cycles: a CPU quota (the cgroup's CFS bandwidth control) lets a group run for
its quota in each period and holds it for the rest; SIGSTOP and SIGCONT do the same to a process
tree without root or a cgroup of its own, on any machine. Every process of the node is held:
workers, their collective threads and the agent, as on a throttled machine. A rank on it takes
`slowdown` times as long for its own work; its peers wait for it at each collective, which is
what a straggler detector must see through.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable

import psutil

from phalanx.local import processes

PERIOD_SECONDS = 0.1
"""One throttling period: the node runs for PERIOD / slowdown of it (CFS's default period)."""
TREE_REFRESH_SECONDS = 1.0
"""How often the node's process trees are listed again (a listing costs CPU too)."""


class Throttler:
    """Holds the processes of slow nodes for part of every period, from its own thread.

    `roots(node)` gives the root pids (agents) of the pods on `node` now; their descendants are
    found from them, so a pod started on a slow node later is slow as well.
    """

    def __init__(self, roots: Callable[[str], list[int]]) -> None:
        self.roots = roots
        self.slowdown: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held: list[psutil.Process] = []

    def slow(self, node: str, slowdown: float) -> None:
        """From now on, `node`'s processes run 1/`slowdown` of the time."""
        if slowdown <= 1:
            raise ValueError(f"slowdown {slowdown} must be above 1")
        self.slowdown[node] = slowdown
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="throttle", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop throttling and let every held process run."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._signal(self._held, signal.SIGCONT)

    def _trees(self) -> dict[str, list[psutil.Process]]:
        return {
            node: [p for root in self.roots(node) for p in processes.tree(root)]
            for node in self.slowdown
        }

    def _loop(self) -> None:
        trees, listed = self._trees(), time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - listed >= TREE_REFRESH_SECONDS:
                trees, listed = self._trees(), time.monotonic()
            slowest = max(self.slowdown.values())
            self._held = [p for tree in trees.values() for p in tree]
            self._signal(self._held, signal.SIGSTOP)
            # One hold for every slow node: the longest; a faster one runs a little less.
            self._stop.wait(PERIOD_SECONDS * (1 - 1 / slowest))
            # Children first, the agent last: a quota holds no process in the stopped state,
            # so the agent must never run while its workers are stopped (a Hang to it).
            self._signal(self._held[::-1], signal.SIGCONT)
            self._held = []
            self._stop.wait(PERIOD_SECONDS / slowest)

    @staticmethod
    def _signal(targets: list[psutil.Process], signum: signal.Signals) -> None:
        for process in targets:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                process.send_signal(signum)
