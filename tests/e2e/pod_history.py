"""Every revision of one pod, watched from a known revision on: what a test asks of a pod's past
that its last state cannot tell, such as which write deleted it."""

from __future__ import annotations

import threading

from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

EVICTED_BY_EVICTION_API = ("DisruptionTarget", "EvictionByEvictionAPI")
"""The condition the API server's eviction subresource writes on a pod before it deletes it
(`kubectl drain`, the cluster autoscaler), even when the pod was already being deleted."""


class PodHistory(threading.Thread):
    """Watches `pod` from its own resourceVersion until it is deleted or `stop()`."""

    def __init__(self, core: k8s.CoreV1Api, pod: k8s.V1Pod) -> None:
        super().__init__(name=f"history-{pod.metadata.name}", daemon=True)
        self.core, self.revisions = core, [pod]
        self._stopped = threading.Event()
        self._watch = watch.Watch()

    def run(self) -> None:
        first = self.revisions[0].metadata
        while not self._stopped.is_set():
            try:
                for event in self._watch.stream(
                    self.core.list_namespaced_pod, first.namespace,
                    field_selector=f"metadata.name={first.name}",
                    resource_version=self.revisions[-1].metadata.resource_version,
                    timeout_seconds=60,
                ):  # fmt: skip
                    self.revisions.append(event["object"])
                    if event["type"] == "DELETED":
                        return
            except (ApiException, HTTPError):  # expired, cut, the API server restarting:
                self._stopped.wait(1.0)  # on from the last revision seen, unless stopped

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()
        self.join(timeout=10)

    def evicted_while_live(self) -> list[str]:
        """The revisions (resourceVersions) the eviction API marked before anything had deleted
        the pod: an eviction that struck a live pod rather than one already going."""
        return [
            str(pod.metadata.resource_version)
            for pod in self.revisions
            if pod.metadata.deletion_timestamp is None and _evicted(pod)
        ]

    def deleted(self) -> bool:
        return any(pod.metadata.deletion_timestamp is not None for pod in self.revisions)


def _evicted(pod: k8s.V1Pod) -> bool:
    return any((c.type, c.reason) == EVICTED_BY_EVICTION_API for c in pod.status.conditions or [])
