"""The assignment channel on a cluster: the job's assignment Lease in, the heartbeat Lease out.

Why two Leases: every agent watches the assignment, which changes once per epoch; the heartbeat
Lease changes every few seconds (rank 0's progress) and carries the agents' reports, which only
the operator watches. One object for both would send every heartbeat to every pod.

The watch runs in a thread and keeps the newest assignment; the agent's loop reads it without
blocking. A dropped watch is resumed (from the last resourceVersion, else with a fresh read).
"""

from __future__ import annotations

import contextlib
import http.client
import sys
import threading
from typing import Any

from phalanx.agent.kubeapi import KubeAPI, close_watch, lease_path
from phalanx.agent.wire import Assignment, Report, WireError
from phalanx.models import labels
from phalanx.models.report_shards import report_lease

RETRY_SECONDS = 1.0


def parse(lease: dict[str, Any]) -> Assignment | None:
    """The assignment in a Lease, if any and valid."""
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(labels.ASSIGNMENT)
    if not raw:
        return None
    try:
        return Assignment.from_json(raw)
    except WireError as error:
        print(f"phalanx-agent: ignoring a malformed assignment: {error}", file=sys.stderr)
        return None


class LeaseAssignments:
    """Follows the job's assignment Lease with a watch."""

    def __init__(
        self, namespace: str, lease: str, api: KubeAPI | None = None, watch_seconds: int = 300
    ) -> None:
        self.api = api or KubeAPI.in_cluster()
        self.namespace, self.lease = namespace, lease
        self.watch_seconds = watch_seconds
        """How long one watch request lasts before it is renewed (the server ends it)."""
        self._latest: Assignment | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._connection: http.client.HTTPConnection | None = None
        self._thread = threading.Thread(target=self._follow, name="assignment-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watch and its connection (the agent's process ending ends it too)."""
        self._stopped.set()
        if self._connection is not None:
            close_watch(self._connection)
        self._thread.join(timeout=self.watch_seconds + 5)

    def current(self) -> Assignment | None:
        with self._lock:
            return self._latest

    def _keep(self, assignment: Assignment | None) -> None:
        if assignment is None:
            return
        with self._lock:
            if self._latest is None or assignment.epoch >= self._latest.epoch:
                self._latest = assignment

    def _opened(self, connection: http.client.HTTPConnection) -> None:
        self._connection = connection
        if self._stopped.is_set():
            close_watch(connection)

    def _follow(self) -> None:
        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    lease = self.api.call("GET", lease_path(self.namespace, self.lease))
                    self._keep(parse(lease))
                    version = lease["metadata"]["resourceVersion"]
                params = {
                    "fieldSelector": f"metadata.name={self.lease}",
                    "resourceVersion": version,
                }
                events = self.api.watch(
                    lease_path(self.namespace), params, self.watch_seconds, self._opened
                )
                with contextlib.closing(events):  # its connection closes whatever ends the loop
                    for event in events:
                        if event.get("type") == "ERROR":  # 410 Gone: the version is too old
                            raise RuntimeError(
                                event.get("object", {}).get("message", "watch error")
                            )
                        lease = event["object"]
                        version = lease["metadata"]["resourceVersion"]
                        self._keep(parse(lease))
            except Exception as error:  # a broken connection, an expired version: read again
                if self._stopped.is_set():
                    return
                print(f"phalanx-agent: assignment watch restarts: {error}", file=sys.stderr)
                version = None
                self._stopped.wait(RETRY_SECONDS)


class LeaseReports:
    """Writes this agent's report as its own annotation of its shard of the job's report Leases
    (`phalanx.models.report_shards`; shard 0 is the heartbeat Lease): a merge patch, so agents
    never conflict."""

    def __init__(self, namespace: str, lease: str, api: KubeAPI | None = None) -> None:
        self.api = api or KubeAPI.in_cluster()
        self.namespace, self.lease = namespace, lease

    def publish(self, report: Report) -> None:
        key = labels.AGENT_REPORT_PREFIX + report.pod
        body = {"metadata": {"annotations": {key: report.to_json()}}}
        lease = report_lease(self.lease, report.pod)
        self.api.merge_patch(lease_path(self.namespace, lease), body)
