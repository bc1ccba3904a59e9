"""The operator's own list-and-watch of the jobs' busiest streams, the pods and the Leases their
agents write: kopf bypassed for them.

Why not kopf's indices: every event went through kopf's machinery (a queue and a worker task
per object, a Body and a cause, the index's handler invocation) before Phalanx saw it. Pods are
most of the operator's events, about three per pod (made, bound, Running), and kopf's watch and
processing of them cost more than the JSON decoding itself (docs/figures.md, "CPU"). The
Leases are the rest and more once the jobs run: each job's rank 0 renews its heartbeat every
2 s and every agent reports each epoch's phases. Here an event is decoded, made the planner's
view (`observe`), and stored, as client-go's informers do; the stream itself (paged lists,
bookmarks, a fresh list on 410) is `phalanx.listwatch`'s, shared with the API service and job
control.

No job is planned before the first list of every watched namespace is in both indices
(`JobIndex.listed`): a job planned from an empty pod index would make pods it already has, or
take its running pods for lost; from an empty Lease index, take its live ranks for silent.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Generic, TypeVar

from kubernetes import client as k8s

from phalanx.listwatch import aio
from phalanx.listwatch.protocol import Change, ObjectKey, Query, Resource
from phalanx.models import labels
from phalanx.operator.cluster import kube

__all__ = ["JobIndex", "JobKey", "ListWatch", "ObjectKey", "Resource"]

JobKey = tuple[str, str]
V = TypeVar("V")


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
        query = Query(self.resource, scope, label_selector=labels.JOB)

        session: aio.SessionFactory = partial(kube.aiohttp_session, self.configuration, 2)
        touched: set[JobKey] = set()
        async for change in aio.follow(session, self.configuration.host, query):
            if change.kind == "LISTED":
                if self._wanted(change.thing):
                    touched.update(key for key in self.index.put(change.thing) if key is not None)
            elif change.kind == "SYNCED":
                seen = {where for where in change.seen if self._wanted_key(where)}
                for key in touched | self.index.keep_only(seen, scope):
                    self.changed(key, None)
                touched = set()
                listed.set()
            else:
                self.apply(change)

    def _wanted(self, thing: Mapping[str, Any]) -> bool:
        """Whether the object's namespace is watched."""
        return self._wanted_key(((thing.get("metadata") or {}).get("namespace") or "", ""))

    def _wanted_key(self, where: ObjectKey) -> bool:
        """Whether namespace `where[0]` is watched: one of the globs matches it and none of the
        exclusions ("!glob", as kopf reads them) does."""
        if not self.patterns:
            return True
        namespace = where[0]
        excluded = [p[1:] for p in self.patterns if p.startswith("!")]
        included = [p for p in self.patterns if not p.startswith("!")] or ["*"]
        return any(fnmatch.fnmatchcase(namespace, p) for p in included) and not any(
            fnmatch.fnmatchcase(namespace, p) for p in excluded
        )

    def apply(self, change: Change) -> None:
        """One watch event into the index; its jobs told."""
        if not self._wanted(change.thing):
            return
        meta = change.thing.get("metadata") or {}
        where = (meta.get("namespace") or "", meta.get("name") or "")
        gone = change.kind == "DELETED"
        jobs = (self.index.remove(where), None) if gone else self.index.put(change.thing)
        for key in {k for k in jobs if k is not None}:
            self.changed(key, change.thing)
