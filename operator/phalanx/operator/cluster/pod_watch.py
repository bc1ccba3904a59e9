"""The two streams the operator watches itself (`watch`): the jobs' pods, and the Leases their
agents write (rank 0's heartbeat, every agent's reports), each into an index the job's
reconcile reads (`PodIndex`, `LeaseIndex`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s

from phalanx.operator import observe
from phalanx.operator.cluster.watch import JobIndex, JobKey, ListWatch, Resource
from phalanx.operator.observe import LeaseFacts
from phalanx.operator.planner import PodView

PODS = Resource("/api/v1", "pods")
LEASES = Resource("/apis/coordination.k8s.io/v1", "leases")


class PodIndex(JobIndex[PodView]):
    """The jobs' pods as the watch last showed them: each job's pods' views, by pod."""

    def __init__(self) -> None:
        super().__init__(observe.pod_view)


class LeaseIndex(JobIndex[LeaseFacts]):
    """What each of the jobs' Leases says (`observe.lease_facts`); a Lease that says nothing
    yet (a heartbeat Lease before rank 0 renews it) is not kept."""

    def __init__(self) -> None:
        super().__init__(observe.lease_facts)


class PodWatch(ListWatch[PodView]):
    """The pods labelled with a job; `changed` is told each job whose pods changed, with the
    node the pod is on (None after a fresh list)."""

    def __init__(
        self, configuration: k8s.Configuration, namespaces: list[str],
        changed: Callable[[JobKey, str | None], None], listed: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        def told(key: JobKey, pod: Mapping[str, Any] | None) -> None:
            changed(key, ((pod or {}).get("spec") or {}).get("nodeName"))

        super().__init__(configuration, namespaces, PODS, PodIndex(), told, listed)


class LeaseWatch(ListWatch[LeaseFacts]):
    """The Leases labelled with a job; `changed` is told each job whose Leases changed."""

    def __init__(
        self, configuration: k8s.Configuration, namespaces: list[str],
        changed: Callable[[JobKey], None], listed: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        super().__init__(
            configuration, namespaces, LEASES, LeaseIndex(), lambda key, _: changed(key), listed
        )
