"""One reconcile loop per job: an asyncio task of the operator's own, started, woken and stopped
by the job's watch events.

Why not kopf's daemons: a daemon needs kopf's finalizer on its job, so every new job cost a patch
before its first reconcile could write (1 000 patches at 1 000 new jobs, each first plan waiting
for the patch to come back by the watch), and each of the job's events went through kopf's
daemon bookkeeping besides. Here the job's events (kopf's `on.event`, which needs no finalizer)
store its body and wake its loop. Nothing is left to do when a job goes: its children are its
by owner reference, and the garbage collector deletes them.

A loop serialises reconciles of one job, wakes on any event of the job, its pods, its Leases or
the nodes (`waker`), and sleeps (without blocking anything) until the planner's next deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)
JobKey = tuple[str, str]
ERROR_RETRY_SECONDS = 2.0
PACE_FLOOR_SECONDS = 0.02
"""Reconciles shorter than this are not paced (`pace_seconds`): every small job's."""


class Loopable(Protocol):
    """What a job's loop needs of the reconciler."""

    def waker(self, key: JobKey) -> asyncio.Event: ...
    def own_seconds(self, key: JobKey) -> float: ...
    def forget(self, key: JobKey) -> None: ...


Step = Callable[[JobKey, Mapping[str, Any]], Awaitable[float | None]]
"""One reconcile of a job as last seen; seconds until the next is due, or None: the job is gone
from the API server though no event said so (a watch that missed its deletion), and its loop
stops (a job made again under the name starts a new one with its first event)."""


class JobLoops:
    """Every live job's loop; `seen` is told each of the jobs' watch events."""

    def __init__(self, reconciler: Loopable, step: Step) -> None:
        self._reconciler = reconciler
        self._step = step
        self._bodies: dict[JobKey, Mapping[str, Any]] = {}
        self._loops: dict[JobKey, tuple[asyncio.Task[None], asyncio.Event]] = {}
        self.stopping: set[asyncio.Task[None]] = set()
        """Stopped loops still finishing the reconcile they were in."""

    def running(self) -> set[JobKey]:
        """The jobs whose loop runs."""
        return set(self._loops)

    def seen(self, key: JobKey, body: Mapping[str, Any], deleted: bool = False) -> None:
        """Job `key` as an event shows it: its loop started, woken, or stopped (the job was
        deleted, or is being deleted: a job kept by another's finalizer, or by a foreground
        deletion while the garbage collector deletes its pods, must not make them again)."""
        if deleted or (body.get("metadata") or {}).get("deletionTimestamp"):
            self._bodies.pop(key, None)
            self.stop(key)
            return
        self._bodies[key] = body
        if key in self._loops:
            self._reconciler.waker(key).set()
            return
        stopped = asyncio.Event()
        self._loops[key] = (asyncio.create_task(self._run(key, stopped)), stopped)

    def stop(self, key: JobKey) -> None:
        """Stop job `key`'s loop (after the reconcile it is in) and forget the job at once: a
        job made again under the same name starts afresh."""
        found = self._loops.pop(key, None)
        if found is not None:
            task, stopped = found
            stopped.set()
            self.stopping.add(task)
            task.add_done_callback(self.stopping.discard)
            self._reconciler.forget(key)

    async def close(self) -> None:
        """The operator stops: every loop cancelled, even one waiting for the API server."""
        for key in list(self._loops):
            self.stop(key)
        tasks = list(self.stopping)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, key: JobKey, stopped: asyncio.Event) -> None:
        waker = self._reconciler.waker(key)
        while not stopped.is_set():
            waker.clear()
            body = self._bodies.get(key)
            if body is None:
                return
            try:
                delay = await self._step(key, body)
            except Exception:  # an API hiccup must not stop the job's loop: retry soon
                log.exception("reconcile of %s/%s failed; retrying", *key)
                delay = ERROR_RETRY_SECONDS
            if delay is None:
                if self._bodies.get(key) is body:
                    self._bodies.pop(key, None)
                    self.stop(key)
                    return
                delay = 0.0  # an event came meanwhile (made again under the name): look again
            if pause := pace_seconds(self._reconciler.own_seconds(key), delay):
                await _wait(stopped, stopped, pause)
            await _wait(waker, stopped, delay)


def pace_seconds(took: float, delay: float) -> float:
    """How long a job's loop rests before its next reconcile, however soon an event comes: as
    long as the last one's own work (plan and execute, less the API server's answers), at most
    `delay` (the planner's own deadline), and not at all for a small job's.

    Why: a job's reconciles take at most half of the operator's time. A large job's reconcile
    costs a fraction of a second (2 000 pods), and its pods' agents acknowledging an epoch send
    thousands of events; reconciled back to back, the operator took the CPU the API server
    needed to answer them. A small job's reconcile takes milliseconds."""
    pause = min(took, delay)
    return pause if pause > PACE_FLOOR_SECONDS else 0.0


async def _wait(waker: asyncio.Event, stopped: asyncio.Event, timeout: float) -> None:
    """Until `waker` is set, the loop is stopped, or `timeout` passes."""
    tasks = [asyncio.ensure_future(waker.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
