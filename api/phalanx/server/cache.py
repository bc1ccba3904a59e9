"""A watch cache of every TrainingJob: one list, then a watch that keeps it current.

Why: a list of 1 000 jobs from the API server costs it (and us) a full read and decode per
request; from memory it is a dictionary scan. Reads are served from here after the caller is
authorised; writes go to the API server, and the watch brings their result back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from phalanx.listwatch import sync
from phalanx.listwatch.protocol import Change, Query, Resource
from phalanx.models import API_VERSION, PLURAL
from phalanx.server.history import JobHistory

log = logging.getLogger(__name__)
Key = tuple[str, str]
Job = Mapping[str, Any]
JOBS = Query(Resource(f"/apis/{API_VERSION}", PLURAL))
"""Every TrainingJob, in every namespace."""


class JobCache:
    """TrainingJobs by (namespace, name), kept current by a background list-and-watch
    (`phalanx.listwatch`)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self._api = api
        self._jobs: dict[Key, Job] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-cache", daemon=True)
        self.ready = threading.Event()
        """Set once the first list is in."""
        self.version = 0
        """Bumped on every change (for streams that wait for one)."""
        self.history = JobHistory()
        """Each job's trajectory as the watch saw it."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following (the stream notices at its next chunk: a bookmark at the latest) and
        wait a little for it; the thread is a daemon."""
        self._stop.set()
        self._thread.join(timeout=5)

    def list(self, namespace: str | None = None, label_selector: str | None = None) -> list[Job]:
        """Jobs in `namespace` (all when None), ordered by namespace and name. A scan of memory:
        `label_selector` saves no read here, so job control's own filter applies it."""
        with self._lock:
            items = sorted(self._jobs.items())
        return [job for (ns, _), job in items if namespace is None or ns == namespace]

    def get(self, namespace: str, name: str) -> Job | None:
        with self._lock:
            return self._jobs.get((namespace, name))

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until `version` passes `since` or `timeout` ends; returns the version."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != since, timeout=timeout)
            return self.version

    def _run(self) -> None:
        listing: dict[Key, Job] = {}
        for change in sync.follow(self._api, JOBS, self._stop):
            if change.kind == "LISTED":
                listing[_key(change.thing)] = change.thing
            elif change.kind == "SYNCED":
                self._relisted({key: job for key, job in listing.items() if key in change.seen})
                listing = {}
                self.ready.set()
            else:
                self._apply(change)

    def _relisted(self, jobs: dict[Key, Job]) -> None:
        """A fresh list's jobs replace the cache's."""
        for key, job in jobs.items():
            self.history.record(key, job)
        self.history.keep_only(set(jobs))
        with self._changed:
            self._jobs = jobs
            self.version += 1
            self._changed.notify_all()

    def _apply(self, change: Change) -> None:
        key = _key(change.thing)
        with self._changed:
            if change.kind == "DELETED":
                self._jobs.pop(key, None)
                self.history.forget(key)
            else:
                self._jobs[key] = change.thing
                self.history.record(key, change.thing)
            self.version += 1
            self._changed.notify_all()


def _key(item: Job) -> Key:
    meta = item["metadata"]
    return meta.get("namespace", ""), meta["name"]
