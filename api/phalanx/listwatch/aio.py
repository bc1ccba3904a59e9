"""The list-and-watch (`protocol`) over aiohttp, for the operator's event loop: its busiest
streams (the jobs' pods and Leases) are decoded here, not by kopf (`phalanx.operator.cluster.watch`
says why).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager

import aiohttp

from phalanx.listwatch.protocol import (
    READ_SLACK_SECONDS,
    Change,
    ExpiredError,
    Lines,
    Query,
    Reading,
    WatchError,
    answer,
    retry_wait,
)

log = logging.getLogger(__name__)
SessionFactory = Callable[[], AbstractAsyncContextManager[aiohttp.ClientSession]]
"""Opens a session to the API server (its credentials read afresh: a rotated token is used)."""


async def follow(
    open_session: SessionFactory, host: str, query: Query
) -> AsyncGenerator[Change, None]:
    """Every change of `query`'s objects at `host`, until cancelled: a list, then the watch from
    its version, opened again when the API server ends it; a fresh list (in a new session) on
    410 and, after a wait, on any other error (logged)."""
    reading = Reading(query)
    where = query.namespace or "all namespaces"
    failures = 0
    while True:
        try:
            async with open_session() as session:
                async for change in list_pages(session, host, reading):
                    yield change
                failures = 0
                while True:  # a stream the API server ended is opened again from here
                    async for change in watch_once(session, host, reading):
                        yield change
        except ExpiredError:
            log.info("the %s watch of %s expired; listing again", query.resource.plural, where)
        except Exception as error:  # the follower must not go stale: list again, soon
            failures += 1
            wait = retry_wait(failures)
            expected = isinstance(error, aiohttp.ClientError | TimeoutError | WatchError)
            level = logging.WARNING if expected else logging.ERROR
            message = "the %s watch of %s failed (%r); listing again in %.1f s"
            plural = query.resource.plural
            log.log(level, message, plural, where, error, wait, exc_info=not expected)
            await asyncio.sleep(wait)
        reading.restart_list()


async def list_pages(
    session: aiohttp.ClientSession, host: str, reading: Reading
) -> AsyncGenerator[Change, None]:
    """A fresh list, a page at a time (a page's objects are let go before the next is read:
    8 000 pods decoded at once would double the operator's memory)."""
    url = host.rstrip("/") + reading.query.path
    token: str | None = None
    while True:
        params = reading.query.list_params(token)
        async with session.get(url, params=params) as response:
            page = answer(response.status, response.reason or "", await response.read())
        changes, token = reading.page(page)
        for change in changes:
            yield change
        if token is None:
            return


async def watch_once(
    session: aiohttp.ClientSession, host: str, reading: Reading
) -> AsyncGenerator[Change, None]:
    """One watch stream from the reading's version until the API server ends it."""
    url = host.rstrip("/") + reading.query.path
    timeout = aiohttp.ClientTimeout(
        total=None, sock_read=reading.query.timeout_seconds + READ_SLACK_SECONDS
    )
    params = reading.query.watch_params(reading.version)
    async with session.get(url, params=params, timeout=timeout) as response:
        if response.status != 200:
            answer(response.status, response.reason or "", await response.read())
        lines = Lines()
        async for chunk in response.content.iter_any():
            for line in lines.feed(chunk):
                if (change := reading.event(line)) is not None:
                    yield change
        for line in lines.end():
            if (change := reading.event(line)) is not None:
                yield change
