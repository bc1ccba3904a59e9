"""The operator's own list-and-watch of the jobs' pods: kopf bypassed for the busiest stream.

Why not a kopf index: every pod event went through kopf's machinery (a queue and a worker task
per pod, a Body and a cause, the index's handler invocation) before Phalanx saw it, and pods are
most of the operator's events: 8 221 of its 10 098 at 300 new jobs, about three per pod (made,
bound, Running). In a GIL profile of that run kopf's watch and processing took about 18 % of
the operator's samples beside the JSON decoding itself (`bench.controlplane`, kwok). Here an
event is decoded, made the planner's `PodView`, and stored, as client-go's informers do: a
list, then a watch from its resourceVersion with bookmarks, a fresh list when the API server
answers 410 (the version is compacted away), and the same watch again when a stream ends.

No job is planned before the first list of every watched namespace is in the index
(`PodIndex.listed`): a job planned from an empty index would make pods it already has, or
take its running pods for lost.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes import client as k8s

from phalanx.models import labels
from phalanx.operator import kube, observe
from phalanx.operator.planner import PodView

log = logging.getLogger(__name__)
JobKey = tuple[str, str]
PodKey = tuple[str, str]
"""A pod's namespace and name."""
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


class PodIndex:
    """The jobs' pods as the watch last showed them: each job's pods' views, by pod."""

    def __init__(self) -> None:
        self._by_job: dict[JobKey, dict[PodKey, PodView]] = {}
        self._job_of: dict[PodKey, JobKey] = {}
        self.listed = False
        """True once every watched namespace was listed: the index holds every pod there was."""

    def get(self, key: JobKey, default: tuple[PodView, ...] = ()) -> tuple[PodView, ...]:
        """Job `key`'s pods (as kopf's index answered the job's loop)."""
        pods = self._by_job.get(key)
        return tuple(pods.values()) if pods else default

    def put(self, pod: Mapping[str, Any]) -> tuple[JobKey | None, JobKey | None]:
        """Store `pod` as it is now; the job it belonged to before and the job it belongs to
        now (None: none, as for a pod without Phalanx's labels, which is dropped)."""
        meta = pod.get("metadata") or {}
        where: PodKey = (meta.get("namespace") or "", meta.get("name") or "")
        before = self.remove(where)
        job = (meta.get("labels") or {}).get(labels.JOB)
        view = observe.pod_view(pod) if job else None
        if view is None:
            return before, None
        key = (where[0], str(job))
        self._by_job.setdefault(key, {})[where] = view
        self._job_of[where] = key
        return before, key

    def remove(self, where: PodKey) -> JobKey | None:
        """Forget the pod `where`; the job it belonged to."""
        key = self._job_of.pop(where, None)
        if key is not None:
            pods = self._by_job[key]
            pods.pop(where, None)
            if not pods:
                del self._by_job[key]
        return key

    def keep_only(self, seen: set[PodKey], scope: str | None) -> set[JobKey]:
        """After a fresh list of namespace `scope` (None: every namespace), whose pods were put
        as they came: forget the pods of the scope it did not show. Their jobs."""
        gone = [where for where in self._job_of if scope in (None, where[0]) and where not in seen]
        return {key for key in map(self.remove, gone) if key is not None}


class PodWatch:
    """Lists and watches the pods labelled with a job in the watched namespaces (all of them
    when none is named, or when one is a glob: then filtered here), into `index`; `changed` is
    told each job whose pods changed, with the node the pod is on."""

    def __init__(
        self, configuration: k8s.Configuration, namespaces: list[str],
        changed: Callable[[JobKey, str | None], None], listed: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        self.configuration = configuration
        self.patterns = list(namespaces) if kube.has_patterns(namespaces) else []
        self.scopes: list[str | None] = [None] if self.patterns or not namespaces else [*namespaces]
        self.changed = changed
        self.listed = listed
        """Told once every scope was listed (`PodIndex.listed`)."""
        self.index = PodIndex()

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
                log.info("the pod watch of %s expired; listing again", scope or "all namespaces")
            except Exception as error:  # the index must not go stale: list again, soon
                wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                expected = isinstance(error, aiohttp.ClientError | TimeoutError | WatchError)
                log.log(logging.WARNING if expected else logging.ERROR,
                        "the pod watch of %s failed (%r); listing again in %.1f s",
                        scope or "all namespaces", error, wait, exc_info=not expected)  # fmt: skip
                await asyncio.sleep(wait)

    def _url(self, scope: str | None) -> str:
        base = self.configuration.host.rstrip("/")
        return f"{base}/api/v1/namespaces/{scope}/pods" if scope else f"{base}/api/v1/pods"

    def _wanted(self, pod: Mapping[str, Any]) -> bool:
        """Whether the pod's namespace is watched: one of the globs matches it and none of the
        exclusions ("!glob", as kopf reads them) does."""
        if not self.patterns:
            return True
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        excluded = [p[1:] for p in self.patterns if p.startswith("!")]
        included = [p for p in self.patterns if not p.startswith("!")] or ["*"]
        return any(fnmatch.fnmatchcase(namespace, p) for p in included) and not any(
            fnmatch.fnmatchcase(namespace, p) for p in excluded
        )

    async def _list(self, session: aiohttp.ClientSession, scope: str | None) -> str:
        """Every pod of the scope into the index, a page at a time (a page's pods are let go
        before the next is read: 8 000 pods decoded at once would double the operator's
        memory); the list's resourceVersion."""
        seen: set[PodKey] = set()
        touched: set[JobKey] = set()
        params = {"labelSelector": labels.JOB, "limit": str(LIST_PAGE)}
        while True:
            async with session.get(self._url(scope), params=params) as response:
                page = await _answer(response)
            for pod in page.get("items") or ():
                if self._wanted(pod):
                    meta = pod.get("metadata") or {}
                    seen.add((meta.get("namespace") or "", meta.get("name") or ""))
                    touched.update(key for key in self.index.put(pod) if key is not None)
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
        kind, pod = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if pod.get("code") == 410:
                raise ExpiredError(pod.get("message"))
            raise WatchError(pod.get("message") or str(pod))
        meta = pod.get("metadata") or {}
        if kind in ("ADDED", "MODIFIED", "DELETED") and self._wanted(pod):
            where = (meta.get("namespace") or "", meta.get("name") or "")
            jobs = (self.index.remove(where), None) if kind == "DELETED" else self.index.put(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            for key in {k for k in jobs if k is not None}:
                self.changed(key, node)
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
    with a large spec can pass that)."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line:
                yield line
    if buffer.strip():
        yield buffer
