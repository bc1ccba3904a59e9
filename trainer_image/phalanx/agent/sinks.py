"""Where node rank 0's agent publishes the heartbeat: a Kubernetes Lease on a cluster, a file
locally. Pluggable: anything with `publish(heartbeat_json)`.

The agent passes on the JSON rank 0's worker wrote as it is (it checks only the epoch): the
operator, which reads it, validates it with `phalanx.models.heartbeat.Heartbeat`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from phalanx.agent.kubeapi import KubeAPI, lease_path
from phalanx.agent.wire import heartbeat_epoch
from phalanx.models import labels


class HeartbeatSink(Protocol):
    def publish(self, heartbeat: str) -> None: ...


class FileSink:
    """Writes the heartbeat JSON to a file, atomically (the local backend reads it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, heartbeat: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(heartbeat)
        tmp.replace(self.path)


class LeaseSink:
    """Renews the job's heartbeat Lease with the heartbeat in an annotation. The pod's service
    account may update only this Lease (the operator's Role)."""

    def __init__(self, namespace: str, lease: str, holder: str, api: KubeAPI | None = None) -> None:
        self.api = api or KubeAPI.in_cluster()
        self.namespace, self.lease, self.holder = namespace, lease, holder

    def publish(self, heartbeat: str) -> None:
        renewed = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: UP017
        body = {
            "metadata": {"annotations": {labels.HEARTBEAT: heartbeat}},
            "spec": {"holderIdentity": self.holder, "renewTime": renewed},
        }
        self.api.merge_patch(lease_path(self.namespace, self.lease), body)


def read_heartbeat(path: Path, epoch: int) -> str | None:
    """The heartbeat JSON rank 0's worker last wrote for `epoch`, if any."""
    try:
        raw = path.read_text()
    except OSError:
        return None
    return raw if heartbeat_epoch(raw) == epoch else None
