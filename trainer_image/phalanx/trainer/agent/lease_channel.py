"""The assignment channel on a cluster: the job's assignment Lease in, the heartbeat Lease out.

Why two Leases: every agent watches the assignment, which changes once per epoch; the heartbeat
Lease changes every few seconds (rank 0's progress) and carries the agents' reports, which only
the operator watches. One object for both would send every heartbeat to every pod.

The watch runs in a thread and keeps the newest assignment; the agent's loop reads it without
blocking. A dropped watch is resumed (from the last resourceVersion, else with a fresh read).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import ValidationError

from phalanx.models import labels
from phalanx.models.assignment import AgentReport, EpochAssignment

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0


def _api(api: Any) -> Any:
    from kubernetes import client, config

    if api is None:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.ApiClient()
    return client.CoordinationV1Api(api)


def parse(lease: Any) -> EpochAssignment | None:
    """The assignment in a Lease (a client object or a dict), if any and valid."""
    metadata = lease.metadata if hasattr(lease, "metadata") else lease.get("metadata", {})
    annotations = (
        metadata.annotations if hasattr(metadata, "annotations") else metadata.get("annotations")
    ) or {}
    raw = annotations.get(labels.ASSIGNMENT)
    if not raw:
        return None
    try:
        return EpochAssignment.model_validate_json(raw)
    except ValidationError as error:
        log.warning("ignoring a malformed assignment: %s", error)
        return None


class LeaseAssignments:
    """Follows the job's assignment Lease with a watch."""

    def __init__(
        self, namespace: str, lease: str, api: Any = None, watch_seconds: int = 300
    ) -> None:
        self.leases = _api(api)
        self.namespace, self.lease = namespace, lease
        self.watch_seconds = watch_seconds
        """How long one watch request lasts before it is renewed (the server ends it)."""
        self._latest: EpochAssignment | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._watch: Any = None
        self._thread = threading.Thread(target=self._follow, name="assignment-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watch once its current request ends, and its connection with it (the agent's
        process ending ends it too)."""
        self._stopped.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(timeout=self.watch_seconds + 5)

    def current(self) -> EpochAssignment | None:
        with self._lock:
            return self._latest

    def _keep(self, assignment: EpochAssignment | None) -> None:
        if assignment is None:
            return
        with self._lock:
            if self._latest is None or assignment.epoch >= self._latest.epoch:
                self._latest = assignment

    def _follow(self) -> None:
        from kubernetes import watch

        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    lease = self.leases.read_namespaced_lease(self.lease, self.namespace)
                    self._keep(parse(lease))
                    version = lease.metadata.resource_version
                self._watch = watch.Watch()  # type: ignore[no-untyped-call]
                stream = self._watch.stream(
                    self.leases.list_namespaced_lease, self.namespace,
                    field_selector=f"metadata.name={self.lease}", resource_version=version,
                    timeout_seconds=self.watch_seconds,
                )  # fmt: skip
                for event in stream:
                    lease = event["object"]
                    version = lease.metadata.resource_version
                    self._keep(parse(lease))
            except Exception as error:  # 410 Gone, a broken connection: read again
                if self._stopped.is_set():
                    return
                log.info("assignment watch restarts: %s", error)
                version = None
                self._stopped.wait(RETRY_SECONDS)


class LeaseReports:
    """Writes this agent's report as its own annotation of the heartbeat Lease (a merge patch,
    so agents never conflict)."""

    def __init__(self, namespace: str, lease: str, api: Any = None) -> None:
        self.leases = _api(api)
        self.namespace, self.lease = namespace, lease

    def publish(self, report: AgentReport) -> None:
        key = labels.AGENT_REPORT_PREFIX + report.pod
        value = report.model_dump_json(by_alias=True, exclude_none=True)
        body = {"metadata": {"annotations": {key: value}}}
        self.leases.patch_namespaced_lease(self.lease, self.namespace, body)
