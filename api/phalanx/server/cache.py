"""A watch cache of every TrainingJob: one list, then a watch that keeps it current.

Why: a list of 1 000 jobs from the API server costs it (and us) a full read and decode per
request; from memory it is a dictionary scan. Reads are served from here after the caller is
authorised; writes go to the API server, and the watch brings their result back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from phalanx.models import GROUP, PLURAL, VERSION
from phalanx.server.history import JobHistory

log = logging.getLogger(__name__)
Key = tuple[str, str]
Job = Mapping[str, Any]
WATCH_SECONDS = 240
RETRY_SECONDS = 1.0


class JobCache:
    """TrainingJobs by (namespace, name), kept current by a background watch."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self._custom = k8s.CustomObjectsApi(api)
        self._jobs: dict[Key, Job] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
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
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()  # type: ignore[no-untyped-call]
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
        while not self._stop.is_set():
            try:
                version = self._relist()
                self.ready.set()
                self._follow(version)
            except ApiException as error:
                if error.status != 410:  # 410 Gone: our version is too old; just relist
                    log.warning("job watch failed (%s); relisting", error.reason)
                    self._stop.wait(RETRY_SECONDS)
            except Exception:  # a dropped connection, a decode error: never stop the cache
                if self._stop.is_set():
                    return  # stopping closed the connection under the watch
                log.exception("job watch failed; relisting")
                self._stop.wait(RETRY_SECONDS)

    def _relist(self) -> str:
        listed: Any = self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        jobs = {_key(item): item for item in listed.get("items", [])}
        for key, job in jobs.items():
            self.history.record(key, job)
        self.history.keep_only(set(jobs))
        with self._changed:
            self._jobs = jobs
            self.version += 1
            self._changed.notify_all()
        return str(listed["metadata"]["resourceVersion"])

    def _follow(self, resource_version: str) -> None:
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        started = time.monotonic()
        for event in self._watch.stream(  # type: ignore[no-untyped-call]
            self._custom.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            resource_version=resource_version,
            timeout_seconds=WATCH_SECONDS,
            allow_watch_bookmarks=True,
        ):
            if self._stop.is_set():
                return
            kind, item = event["type"], event["object"]
            if kind == "ERROR":
                raise ApiException(status=item.get("code", 500), reason=item.get("message"))
            if kind == "BOOKMARK":
                continue
            with self._changed:
                if kind == "DELETED":
                    self._jobs.pop(_key(item), None)
                    self.history.forget(_key(item))
                else:
                    self._jobs[_key(item)] = item
                    self.history.record(_key(item), item)
                self.version += 1
                self._changed.notify_all()
        log.debug("job watch ended after %.0f s; resuming", time.monotonic() - started)


def _key(item: Job) -> Key:
    meta = item["metadata"]
    return meta.get("namespace", ""), meta["name"]
