"""The events the operator posts about a job (core/v1 Events, as `kubectl describe` shows them).

Why its own module: an event is a courtesy to whoever reads the job, never a reason to fail a
reconcile, so a refused one is logged and dropped here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.events import JobEvent
from phalanx.models.names import event_name_prefix
from phalanx.operator.cluster import writes

log = logging.getLogger(__name__)
COMPONENT = "phalanx-operator"


def emit(
    api: k8s.ApiClient, raw: Mapping[str, Any], event: JobEvent, now: datetime, instance: str
) -> None:
    """Post `event` about the job read as `raw`, as `instance` of the operator."""
    meta = raw.get("metadata", {})
    namespace = meta.get("namespace") or "default"
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": event_name_prefix(meta.get("name") or ""),
            "namespace": namespace,
        },
        "involvedObject": {
            "apiVersion": raw.get("apiVersion"),
            "kind": raw.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": event.reason,
        "message": event.message[:1024],
        "type": event.type,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now.isoformat(),
        "lastTimestamp": now.isoformat(),
        "count": 1,
    }
    try:
        writes.create(api, namespace, body)
    except ApiException as error:
        log.warning(
            "could not emit event %s for %s: %s", event.reason, meta.get("name"), error.reason
        )
