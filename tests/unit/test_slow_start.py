"""`slow_start.run`: a plan's pod creates in batches of 1, 2, 4..., then a window, the first
failure stopping the rest, on a real thread pool. `slow_start.together`: a plan's deletes all at once (in flight
together), the first failure raised after all ran."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest

from phalanx.operator import slow_start


def recording(ran: list[int], lock: threading.Lock, fail_at: int | None = None):  # type: ignore[no-untyped-def]
    def call(index: int) -> None:
        with lock:
            ran.append(index)
        if index == fail_at:
            raise RuntimeError(f"create {index} refused")

    return [lambda i=i: call(i) for i in range(20)]


def test_every_call_runs_and_each_batch_of_several_is_waited_for() -> None:
    ran: list[int] = []
    waits: list[float] = []
    with ThreadPoolExecutor(8) as pool:
        slow_start.run(recording(ran, threading.Lock())[:10], pool, waits.append)
    assert sorted(ran) == list(range(10))
    assert len(waits) == 3, "batches 1 (on the caller's thread), 2, 4, then a window of 3"


def test_the_first_failure_stops_the_batches_after_its_own() -> None:
    ran: list[int] = []
    with ThreadPoolExecutor(8) as pool, pytest.raises(RuntimeError, match="create 4 refused"):
        slow_start.run(recording(ran, threading.Lock(), fail_at=4), pool)
    assert sorted(ran) == list(range(7)), "its batch (3 to 6) finished; 7 and after never sent"


def test_past_the_batches_a_window_keeps_at_most_the_cap_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slow_start, "MAX_IN_FLIGHT", 4)
    turn = threading.Condition()
    flying, most = [0], [0]
    ran: list[int] = []

    def call(index: int) -> None:
        with turn:
            flying[0] += 1
            most[0] = max(most[0], flying[0])
            turn.notify_all()
            if index >= 3:  # the window's calls wait until it is full, or all are sent
                turn.wait_for(lambda: flying[0] >= 4 or len(ran) + flying[0] == 20, timeout=10)
            flying[0] -= 1
            ran.append(index)

    waits: list[float] = []
    with ThreadPoolExecutor(8) as pool:
        slow_start.run([partial(call, i) for i in range(20)], pool, waits.append)
    assert sorted(ran) == list(range(20))
    assert most[0] == 4, "batches of 1 and 2, then 4 in flight at a time, never more"
    assert len(waits) == 2, "the batch of 2, then the window"


def test_the_window_sends_nothing_after_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slow_start, "MAX_IN_FLIGHT", 2)
    ran: list[int] = []
    with ThreadPoolExecutor(8) as pool, pytest.raises(RuntimeError, match="create 5 refused"):
        slow_start.run(recording(ran, threading.Lock(), fail_at=5), pool)
    assert 5 in ran
    assert max(ran) <= 5 + 2 + 1, "at most the window in flight (and one sent as it failed)"


def test_together_sends_every_call_at_once_and_raises_the_first_failure_after_all() -> None:
    arrived = threading.Barrier(3, timeout=10)  # passes only if all three are in flight at once
    ran: list[int] = []
    lock = threading.Lock()

    def call(index: int) -> None:
        arrived.wait()
        with lock:
            ran.append(index)
        if index in (1, 2):
            raise RuntimeError(f"delete {index} failed")

    waits: list[float] = []
    with ThreadPoolExecutor(8) as pool, pytest.raises(RuntimeError, match="delete 1 failed"):
        slow_start.together([partial(call, i) for i in range(3)], pool, waits.append)
    assert sorted(ran) == [0, 1, 2]
    assert len(waits) == 1
