"""Where node rank 0's agent publishes the heartbeat: a Kubernetes Lease on a cluster, a file
locally. Pluggable: anything with `publish(heartbeat)`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from phalanx.models import labels
from phalanx.models.heartbeat import Heartbeat


class HeartbeatSink(Protocol):
    def publish(self, heartbeat: Heartbeat) -> None: ...


class FileSink:
    """Writes the heartbeat JSON to a file, atomically (the local backend reads it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, heartbeat: Heartbeat) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(heartbeat.model_dump_json(by_alias=True, exclude_none=True))
        tmp.replace(self.path)


class LeaseSink:
    """Renews the job's heartbeat Lease with the heartbeat in an annotation. The pod's service
    account may update only this Lease (the operator's Role)."""

    def __init__(self, namespace: str, lease: str, holder: str, api: Any = None) -> None:
        from kubernetes import client, config

        if api is None:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api = client.ApiClient()
        self.api = client.CoordinationV1Api(api)
        self.namespace, self.lease, self.holder = namespace, lease, holder

    def publish(self, heartbeat: Heartbeat) -> None:
        beat = heartbeat.model_dump_json(by_alias=True, exclude_none=True)
        renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "metadata": {"annotations": {labels.HEARTBEAT: beat}},
            "spec": {"holderIdentity": self.holder, "renewTime": renewed},
        }
        self.api.patch_namespaced_lease(self.lease, self.namespace, body)


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The heartbeat rank 0's worker last wrote, if any."""
    try:
        return Heartbeat.model_validate(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        return None
