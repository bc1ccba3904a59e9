"""The operator's own list-and-watch of the jobs' busiest streams, the pods and the Leases their
agents write: kopf bypassed for them.

Why not kopf's indices: every event went through kopf's machinery (a queue and a worker task
per object, a Body and a cause, the index's handler invocation) before Phalanx saw it. Pods are
most of the operator's events: 8 221 of its 10 098 at 300 new jobs, about three per pod (made,
bound, Running), and in a GIL profile of that run kopf's watch and processing took about 18 %
of the operator's samples beside the JSON decoding itself (`bench.controlplane`, kwok). The
Leases are the rest and more once the jobs run: each job's rank 0 renews its heartbeat every
2 s and every agent reports each epoch's phases. Here an event is decoded, made the planner's
view (`observe`), and stored, as client-go's informers do: a list, then a watch from its
resourceVersion with bookmarks, a fresh list when the API server answers 410 (the version is
compacted away), and the same watch again when a stream ends.

No job is planned before the first list of every watched namespace is in both indices
(`JobIndex.listed`): a job planned from an empty pod index would make pods it already has, or
take its running pods for lost; from an empty Lease index, take its live ranks for silent.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
from kubernetes import client as k8s

from phalanx.models import labels
from phalanx.operator import kube

log = logging.getLogger(__name__)
JobKey = tuple[str, str]
ObjectKey = tuple[str, str]
"""An object's namespace and name."""
V = TypeVar("V")
SERVER_TIMEOUT_SECONDS = 300
"""How long the API server keeps a watch open (kopf's setting for the other streams)."""
READ_SLACK_SECONDS = 30
"""A stream silent this much longer than `SERVER_TIMEOUT_SECONDS` (bookmarks come every
minute) is dead: it is opened again."""
LIST_PAGE = 500
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
"""Waits before listing again after an error, the last repeated."""


class ExpiredError(Exception):
    """The watch's resourceVersion is gone from the API server's history (410): list again."""


class WatchError(Exception):
    """The API server refused the list or the watch, or sent an error event."""


@dataclass(frozen=True)
class Resource:
    """A namespaced resource: the API path of its group and version, and its plural."""

    api: str
    plural: str


class JobIndex(Generic[V]):
    """Objects labelled with a job as the watch last showed them: each job's objects' views
    (`view`: None for one the planner has no use for, which is not kept), by object."""

    def __init__(self, view: Callable[[Mapping[str, Any]], V | None]) -> None:
        self._view = view
        self._by_job: dict[JobKey, dict[ObjectKey, V]] = {}
        self._job_of: dict[ObjectKey, JobKey] = {}
        self.listed = False
        """True once every watched namespace was listed: the index holds every object there
        was."""

    def get(self, key: JobKey, default: tuple[V, ...] = ()) -> tuple[V, ...]:
        """Job `key`'s objects' views (as a kopf index answered the job's loop)."""
        found = self._by_job.get(key)
        return tuple(found.values()) if found else default

    def put(self, thing: Mapping[str, Any]) -> tuple[JobKey | None, JobKey | None]:
        """Store `thing` as it is now; the job it belonged to before and the job it belongs to
        now (None: none, as for an object without Phalanx's labels, or one without a view,
        which is dropped)."""
        meta = thing.get("metadata") or {}
        where: ObjectKey = (meta.get("namespace") or "", meta.get("name") or "")
        before = self.remove(where)
        job = (meta.get("labels") or {}).get(labels.JOB)
        view = self._view(thing) if job else None
        if view is None:
            return before, None
        key = (where[0], str(job))
        self._by_job.setdefault(key, {})[where] = view
        self._job_of[where] = key
        return before, key

    def remove(self, where: ObjectKey) -> JobKey | None:
        """Forget the object `where`; the job it belonged to."""
        key = self._job_of.pop(where, None)
        if key is not None:
            kept = self._by_job[key]
            kept.pop(where, None)
            if not kept:
                del self._by_job[key]
        return key

    def keep_only(self, seen: set[ObjectKey], scope: str | None) -> set[JobKey]:
        """After a fresh list of namespace `scope` (None: every namespace), whose objects were
        put as they came: forget those of the scope it did not show. Their jobs."""
        gone = [where for where in self._job_of if scope in (None, where[0]) and where not in seen]
        return {key for key in map(self.remove, gone) if key is not None}


class ListWatch(Generic[V]):
    """Lists and watches the objects of `resource` labelled with a job in the watched
    namespaces (all of them when none is named, or when one is a glob: then filtered here),
    into `index`; `changed` is told each job whose objects changed, with the object as it is
    now (None after a fresh list)."""

    def __init__(
        self, configuration: k8s.Configuration, namespaces: list[str], resource: Resource,
        index: JobIndex[V], changed: Callable[[JobKey, Mapping[str, Any] | None], None],
        listed: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        self.configuration = configuration
        self.patterns = list(namespaces) if kube.has_patterns(namespaces) else []
        self.scopes: list[str | None] = [None] if self.patterns or not namespaces else [*namespaces]
        self.resource = resource
        self.changed = changed
        self.listed = listed
        """Told once every scope was listed (`JobIndex.listed`)."""
        self.index = index

    async def run(self) -> None:
        """Follow every scope until cancelled."""
        listed = [asyncio.Event() for _ in self.scopes]
        followers = [
            asyncio.create_task(self._follow(scope, done))
            for scope, done in zip(self.scopes, listed, strict=True)
        ]
        try:
            await asyncio.gather(*(done.wait() for done in listed))
            self.index.listed = True
            self.listed()
            await asyncio.gather(*followers)
        finally:
            for follower in followers:
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)

    async def _follow(self, scope: str | None, listed: asyncio.Event) -> None:
        failures = 0
        while True:
            try:
                async with kube.aiohttp_session(self.configuration, limit=2) as session:
                    version = await self._list(session, scope)
                    listed.set()
                    failures = 0
                    while True:  # a stream the API server ended is opened again from here
                        version = await self._watch(session, scope, version)
            except ExpiredError:
                log.info("the %s watch of %s expired; listing again", self.resource.plural,
                         scope or "all namespaces")  # fmt: skip
            except Exception as error:  # the index must not go stale: list again, soon
                wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                expected = isinstance(error, aiohttp.ClientError | TimeoutError | WatchError)
                log.log(logging.WARNING if expected else logging.ERROR,
                        "the %s watch of %s failed (%r); listing again in %.1f s",
                        self.resource.plural, scope or "all namespaces", error, wait,
                        exc_info=not expected)  # fmt: skip
                await asyncio.sleep(wait)

    def _url(self, scope: str | None) -> str:
        base = self.configuration.host.rstrip("/") + self.resource.api
        plural = self.resource.plural
        return f"{base}/namespaces/{scope}/{plural}" if scope else f"{base}/{plural}"

    def _wanted(self, thing: Mapping[str, Any]) -> bool:
        """Whether the object's namespace is watched: one of the globs matches it and none of
        the exclusions ("!glob", as kopf reads them) does."""
        if not self.patterns:
            return True
        namespace = (thing.get("metadata") or {}).get("namespace") or ""
        excluded = [p[1:] for p in self.patterns if p.startswith("!")]
        included = [p for p in self.patterns if not p.startswith("!")] or ["*"]
        return any(fnmatch.fnmatchcase(namespace, p) for p in included) and not any(
            fnmatch.fnmatchcase(namespace, p) for p in excluded
        )

    async def _list(self, session: aiohttp.ClientSession, scope: str | None) -> str:
        """Every object of the scope into the index, a page at a time (a page's objects are
        let go before the next is read: 8 000 pods decoded at once would double the operator's
        memory); the list's resourceVersion."""
        seen: set[ObjectKey] = set()
        touched: set[JobKey] = set()
        params = {"labelSelector": labels.JOB, "limit": str(LIST_PAGE)}
        while True:
            async with session.get(self._url(scope), params=params) as response:
                page = await _answer(response)
            for thing in page.get("items") or ():
                if self._wanted(thing):
                    meta = thing.get("metadata") or {}
                    seen.add((meta.get("namespace") or "", meta.get("name") or ""))
                    touched.update(key for key in self.index.put(thing) if key is not None)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                break
            params["continue"] = meta["continue"]
        for key in touched | self.index.keep_only(seen, scope):
            self.changed(key, None)
        return str(meta.get("resourceVersion") or "")

    async def _watch(self, session: aiohttp.ClientSession, scope: str | None, version: str) -> str:
        """One watch stream from `version` until the API server ends it; the last version seen."""
        params = {
            "labelSelector": labels.JOB, "watch": "true", "allowWatchBookmarks": "true",
            "resourceVersion": version, "timeoutSeconds": str(SERVER_TIMEOUT_SECONDS),
        }  # fmt: skip
        timeout = aiohttp.ClientTimeout(
            total=None, sock_read=SERVER_TIMEOUT_SECONDS + READ_SLACK_SECONDS
        )
        async with session.get(self._url(scope), params=params, timeout=timeout) as response:
            if response.status != 200:
                await _answer(response)
            async for line in _lines(response.content):
                version = self._apply(json.loads(line)) or version
        return version

    def _apply(self, event: Mapping[str, Any]) -> str | None:
        """One watch event into the index; its resourceVersion."""
        kind, thing = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if thing.get("code") == 410:
                raise ExpiredError(thing.get("message"))
            raise WatchError(thing.get("message") or str(thing))
        meta = thing.get("metadata") or {}
        if kind in ("ADDED", "MODIFIED", "DELETED") and self._wanted(thing):
            where = (meta.get("namespace") or "", meta.get("name") or "")
            gone = kind == "DELETED"
            jobs = (self.index.remove(where), None) if gone else self.index.put(thing)
            for key in {k for k in jobs if k is not None}:
                self.changed(key, thing)
        return meta.get("resourceVersion")


async def _answer(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """The JSON of a list; a refusal raised (410 as ExpiredError)."""
    body = await response.read()
    if response.status == 410:
        raise ExpiredError(body.decode(errors="replace"))
    if response.status != 200:
        try:
            message = json.loads(body).get("message") or response.reason
        except ValueError:
            message = response.reason
        raise WatchError(f"{response.status}: {message}")
    answer: dict[str, Any] = json.loads(body)
    return answer


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The stream's lines, however long (aiohttp's own line reader stops at 128 KiB, and a pod
    with a large spec, or a Lease with 2 048 agents' reports, can pass that)."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line:
                yield line
    if buffer.strip():
        yield buffer
