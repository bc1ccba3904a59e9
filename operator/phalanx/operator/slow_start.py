"""A plan's pod creates (and a job's report Leases, a Lease per rank) sent in batches that
double, as the Job and ReplicaSet controllers send theirs (`slowStartBatch` in
kube-controller-manager), then in a window of `MAX_IN_FLIGHT`.

Why: one after another, a reconcile that creates a large job's pods waits for one round trip per
pod; in batches, several at once (docs/figures.md, "Large job"). Why batches
that start at one and double, rather than all at once: a create that will be refused (an
admission webhook, a quota, a name too long) is refused once, not two thousand times, and the
plan's later creations are skipped as before; a job whose creates go through soon has
`MAX_IN_FLIGHT` of them in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

MAX_IN_FLIGHT = 32
"""The most creates of one reconcile in flight at once (kube's Job controller caps its batches at
500; a reconcile here shares the API server with every other job's, so fewer)."""


def run(
    calls: Sequence[Callable[[], object]], pool: ThreadPoolExecutor,
    waited: Callable[[float], None] = lambda _: None,
) -> None:  # fmt: skip
    """Carry out `calls` on `pool` in batches of 1, 2, 4... below `MAX_IN_FLIGHT`, each batch
    whole before the next, then the rest in a window of `MAX_IN_FLIGHT` in flight, the next
    sent as soon as one is answered (batches of `MAX_IN_FLIGHT` made a large job's creates wait
    for each batch's slowest answer, over a hundred times). The first call
    that raises stops the rest from being sent and is raised once those in flight are done.
    `waited` is told how long the batches and the window were waited for (the API server's
    time, for the reconcile's measure of its own)."""
    sent, size = 0, 1
    while sent < len(calls) and size < MAX_IN_FLIGHT:
        batch = calls[sent : sent + size]
        if len(batch) == 1:  # no thread hop for a small plan's pods
            batch[0]()
        else:
            together(batch, pool, waited)
        sent += len(batch)
        size *= 2
    _window(calls[sent:], pool, waited)


def _window(
    calls: Sequence[Callable[[], object]], pool: ThreadPoolExecutor,
    waited: Callable[[float], None],
) -> None:  # fmt: skip
    """`calls` on `pool`, at most `MAX_IN_FLIGHT` in flight; none sent once one raised, and
    the first error (in the calls' order) raised once those in flight are done."""
    if not calls:
        return
    began = time.perf_counter()
    flying: list[Future[object]] = []
    pending: set[Future[object]] = set()
    failed = threading.Event()
    for call in calls:
        if len(pending) >= MAX_IN_FLIGHT:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            if any(future.exception() is not None for future in done):
                failed.set()
        if failed.is_set():
            break
        future = pool.submit(call)
        future.add_done_callback(lambda ended: _note_failure(ended, failed))
        flying.append(future)
        pending.add(future)
    wait(pending)
    waited(time.perf_counter() - began)
    for future in flying:
        future.result()  # the first error, in the calls' order


def _note_failure(future: Future[object], failed: threading.Event) -> None:
    if future.exception() is not None:
        failed.set()


def together(
    calls: Sequence[Callable[[], object]], pool: ThreadPoolExecutor,
    waited: Callable[[float], None] = lambda _: None,
) -> None:  # fmt: skip
    """Carry out `calls` on `pool` all at once (as many at a time as its threads), for a few
    requests that need not wait for one another and would not be refused alike (a plan's pod
    deletes, a job's children of different kinds). One after another, a restart that retired
    two lost nodes' pods waited 0.7 s for each under a storm. The first error (in the calls'
    order) is raised once all are done."""
    if len(calls) == 1:
        calls[0]()
        return
    began = time.perf_counter()
    futures = [pool.submit(call) for call in calls]
    wait(futures)
    waited(time.perf_counter() - began)
    for future in futures:
        future.result()
