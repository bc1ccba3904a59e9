"""The jobs' loops (`phalanx.operator.loops`): a job's first event starts its loop, later ones
wake it with the body they bring, and a deletion (done, or under way) stops it and forgets the
job; nothing of a job made again under the same name is carried over."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from harness.jobs import job_manifest
from phalanx.operator.loops import JobLoops

KEY = ("ns", "j")
DEADLINE_SECONDS = 5.0


class Reconciler:
    """The loops' side of the operator's reconciler, recording what the loops ask of it."""

    def __init__(self) -> None:
        self.wakers: dict[tuple[str, str], asyncio.Event] = {}
        self.forgotten: list[tuple[str, str]] = []
        self.seen: list[str] = []
        self.reconciled = asyncio.Event()

    def waker(self, key: tuple[str, str]) -> asyncio.Event:
        return self.wakers.setdefault(key, asyncio.Event())

    def own_seconds(self, key: tuple[str, str]) -> float:
        return 0.0

    def forget(self, key: tuple[str, str]) -> None:
        self.forgotten.append(key)
        self.wakers.pop(key, None)

    async def step(self, key: tuple[str, str], body: Mapping[str, Any]) -> float:
        self.seen.append(body["metadata"]["resourceVersion"])
        self.reconciled.set()
        return 30.0  # the planner's next deadline: only an event wakes it sooner


def _job(version: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": version}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T09:00:00Z"
    return job_manifest(namespace="ns", metadata=meta)


async def _reconciled(reconciler: Reconciler) -> None:
    await asyncio.wait_for(reconciler.reconciled.wait(), DEADLINE_SECONDS)
    reconciler.reconciled.clear()


def test_the_first_event_starts_the_loop_and_the_next_wakes_it_with_its_body() -> None:
    async def scenario() -> list[str]:
        reconciler = Reconciler()
        loops = JobLoops(reconciler, reconciler.step)
        loops.seen(KEY, _job("1"))
        await _reconciled(reconciler)
        loops.seen(KEY, _job("2"))
        await _reconciled(reconciler)
        assert loops.running() == {KEY}
        await loops.close()
        return reconciler.seen

    assert asyncio.run(scenario()) == ["1", "2"]


def test_a_deleted_job_and_one_being_deleted_stop_their_loop_and_are_forgotten() -> None:
    async def scenario(event: dict[str, Any], deleted: bool) -> Reconciler:
        reconciler = Reconciler()
        loops = JobLoops(reconciler, reconciler.step)
        loops.seen(KEY, _job("1"))
        await _reconciled(reconciler)
        loops.seen(KEY, event, deleted=deleted)
        assert loops.running() == set()
        loops.seen(KEY, _job("3", deleting=True))  # the foreground deletion's later events
        assert loops.running() == set()
        stopped = list(loops.stopping)
        await asyncio.wait_for(asyncio.gather(*stopped), DEADLINE_SECONDS)  # ends by itself
        await loops.close()
        return reconciler

    for event, deleted in ((_job("2"), True), (_job("2", deleting=True), False)):
        reconciler = asyncio.run(scenario(event, deleted))
        assert reconciler.seen == ["1"], "no reconcile of a job that is going"
        assert reconciler.forgotten == [KEY]


def test_a_job_made_again_under_its_name_gets_a_fresh_loop() -> None:
    async def scenario() -> Reconciler:
        reconciler = Reconciler()
        loops = JobLoops(reconciler, reconciler.step)
        loops.seen(KEY, _job("1"))
        await _reconciled(reconciler)
        loops.seen(KEY, _job("1"), deleted=True)
        loops.seen(KEY, _job("5"))
        await _reconciled(reconciler)
        await loops.close()
        return reconciler

    reconciler = asyncio.run(scenario())
    assert reconciler.seen == ["1", "5"]
    assert reconciler.forgotten == [KEY, KEY], "once when deleted, once as the operator stops"


def test_a_failing_reconcile_is_tried_again_and_close_cancels_a_loop_in_flight() -> None:
    async def scenario() -> int:
        calls = 0
        blocked = asyncio.Event()

        async def step(key: tuple[str, str], body: Mapping[str, Any]) -> float:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("the API server hiccuped")
            blocked.set()
            await asyncio.Event().wait()  # an answer that never comes
            return 0.0

        reconciler = Reconciler()
        loops = JobLoops(reconciler, step)
        loops.seen(KEY, _job("1"))
        await asyncio.wait_for(blocked.wait(), DEADLINE_SECONDS)  # ERROR_RETRY_SECONDS later
        await asyncio.wait_for(loops.close(), DEADLINE_SECONDS)
        return calls

    assert asyncio.run(scenario()) == 2


def test_a_job_the_api_server_no_longer_has_stops_its_loop_without_an_event() -> None:
    """A reconcile that finds the job gone (None: its status write answered 404) stops the loop,
    as a deletion's event would have; unless the job was made again meanwhile."""

    async def scenario(made_again: bool) -> tuple[Reconciler, set[tuple[str, str]], list[str]]:
        reconciler = Reconciler()
        loops: JobLoops
        looked: list[str] = []

        async def step(key: tuple[str, str], body: Mapping[str, Any]) -> float | None:
            looked.append(body["metadata"]["resourceVersion"])
            if body["metadata"]["resourceVersion"] == "1":
                if made_again:
                    loops.seen(KEY, _job("9"))
                return None
            reconciler.reconciled.set()
            return 30.0

        loops = JobLoops(reconciler, step)
        loops.seen(KEY, _job("1"))
        if made_again:
            await _reconciled(reconciler)
        else:
            while loops.running():  # stops by itself, or the deadline below fails the test
                await asyncio.sleep(0.01)
        running = loops.running()
        await loops.close()
        return reconciler, running, looked

    reconciler, running, looked = asyncio.run(asyncio.wait_for(scenario(False), DEADLINE_SECONDS))
    assert (running, looked, reconciler.forgotten) == (set(), ["1"], [KEY])
    reconciler, running, looked = asyncio.run(asyncio.wait_for(scenario(True), DEADLINE_SECONDS))
    assert (running, looked) == ({KEY}, ["1", "9"]), "the job made again keeps the loop"
