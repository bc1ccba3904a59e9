"""The test plays kubelet (and scheduler): it binds pods to nodes, sets their phases and exit
codes, evicts and deletes them, flips node readiness and renews the heartbeat Lease, all through
the real API server, as envtest-based operator tests do. Nothing here is a mock of our code.
"""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from harness.controlplane import wait_until
from phalanx.models import labels


def _now() -> str:
    return datetime.now(UTC).isoformat()


class FakeKubelet:
    """Kubelet and scheduler behaviour, driven explicitly by a test, for one namespace."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.core = k8s.CoreV1Api(api)
        self.coordination = k8s.CoordinationV1Api(api)
        self.namespace = namespace
        self._stop = threading.Event()
        self.reaping = threading.Event()
        """Set while this kubelet completes graceful deletions (clear it to hold pods Terminating)."""
        self.reaping.set()
        self._watch: watch.Watch | None = None
        self._reaper = threading.Thread(target=self._reap_terminating, daemon=True)
        self._reaper.start()

    def close(self) -> None:
        self._stop.set()
        self.reaping.set()
        if self._watch is not None:
            self._watch.stop()

    # nodes -------------------------------------------------------------------------------
    def add_nodes(self, *names: str) -> None:
        for name in names:
            with contextlib.suppress(ApiException):
                self.core.create_node(
                    k8s.V1Node(
                        metadata=k8s.V1ObjectMeta(
                            name=name, labels={"kubernetes.io/hostname": name}
                        )
                    )
                )
            self.set_node_ready(name, True)

    def set_node_ready(self, name: str, ready: bool) -> None:
        condition = {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                     "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}  # fmt: skip
        self.core.patch_node_status(name, {"status": {"conditions": [condition]}})

    # pods ----------------------------------------------------------------------------------
    def pods(self, job: str, epoch: int | None = None, role: str = "node") -> dict[int, k8s.V1Pod]:
        """Live pods of `job` (not terminating), by rank."""
        selector = f"{labels.JOB}={job},{labels.ROLE}={role}"
        if epoch is not None:
            selector += f",{labels.EPOCH}={epoch}"
        items = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        return {
            int(p.metadata.labels[labels.NODE_RANK]): p
            for p in items
            if p.metadata.deletion_timestamp is None
        }

    def wait_pods(
        self, job: str, epoch: int, count: int, role: str = "node", timeout: float = 30
    ) -> dict[int, k8s.V1Pod]:
        found: dict[int, k8s.V1Pod] = {}

        def ready() -> bool:
            nonlocal found
            found = self.pods(job, epoch, role)
            return len(found) == count

        wait_until(ready, timeout, f"{count} {role} pods of {job} epoch {epoch}")
        return found

    def bind(self, pod: str, node: str) -> None:
        """What the scheduler does: bind the pod to a node."""
        body = k8s.V1Binding(
            metadata=k8s.V1ObjectMeta(name=pod),
            target=k8s.V1ObjectReference(kind="Node", name=node),
        )
        # Unparsed: the client cannot read a Binding back. The raw response holds its
        # connection until it is read and released; dropped, it left an unclosed socket for the
        # garbage collector (a ResourceWarning, an error under filterwarnings=error).
        response: Any = self.core.create_namespaced_pod_binding(
            pod, self.namespace, body, _preload_content=False
        )
        response.read()
        response.release_conn()

    def set_status(self, pod: str, status: dict[str, Any]) -> None:
        self.core.patch_namespaced_pod_status(pod, self.namespace, {"status": status})

    def run(self, pod: str) -> None:
        self.set_status(pod, {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "trainer", "image": "img", "imageID": "", "ready": True, "restartCount": 0,
                                   "state": {"running": {"startedAt": _now()}}}],
        })  # fmt: skip

    def start_gang(
        self, job: str, epoch: int, count: int, nodes: list[str] | None = None
    ) -> dict[int, k8s.V1Pod]:
        """Wait for the epoch's pods, bind rank r to nodes[r] (node-r by default) and run them."""
        pods = self.wait_pods(job, epoch, count)
        for rank, pod in sorted(pods.items()):
            self.bind(pod.metadata.name, (nodes or [f"node-{i}" for i in range(count)])[rank])
            self.run(pod.metadata.name)
        return pods

    def exit(self, pod: str, code: int, reason: str = "Error", message: str = "") -> None:
        terminated = {
            "exitCode": code,
            "reason": reason,
            "message": message,
            "startedAt": _now(),
            "finishedAt": _now(),
        }
        self.set_status(pod, {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [{"name": "trainer", "image": "img", "imageID": "", "ready": False, "restartCount": 0,
                                   "state": {"terminated": terminated}}],
        })  # fmt: skip

    def evict(self, pod: str) -> None:
        self.set_status(
            pod,
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
            },
        )

    def unschedulable(self, pod: str) -> None:
        self.set_status(pod, {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/4 nodes are available"}]})  # fmt: skip

    def image_pull_error(self, pod: str) -> None:
        self.set_status(pod, {"phase": "Pending", "containerStatuses": [
            {"name": "trainer", "image": "img", "imageID": "", "ready": False, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "img"'}}}]})  # fmt: skip

    def delete(self, pod: str) -> None:
        """Someone else deletes a pod (the reaper completes the deletion as a kubelet would)."""
        self.core.delete_namespaced_pod(pod, self.namespace)

    # heartbeat -----------------------------------------------------------------------------
    def heartbeat(self, job: str, beat: dict[str, Any]) -> None:
        """What node rank 0's agent does: write progress into the job's Lease."""
        body = {"metadata": {"annotations": {labels.HEARTBEAT: json.dumps(beat)}},
                "spec": {"holderIdentity": f"{job}-agent", "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}  # fmt: skip
        self.coordination.patch_namespaced_lease(f"{job}-heartbeat", self.namespace, body)

    # the kubelet finishing graceful deletions ---------------------------------------------------
    def _reap_terminating(self) -> None:
        """A deleted pod bound to a node stays Terminating until its kubelet confirms; confirm."""
        while not self._stop.is_set():
            self.reaping.wait()
            for pod in self.core.list_namespaced_pod(self.namespace).items:  # held while paused
                if pod.metadata.deletion_timestamp is not None:
                    with contextlib.suppress(ApiException):
                        self.core.delete_namespaced_pod(
                            pod.metadata.name, self.namespace, grace_period_seconds=0
                        )
            self._watch = watch.Watch()
            try:
                for event in self._watch.stream(
                    self.core.list_namespaced_pod, self.namespace, timeout_seconds=5
                ):
                    pod = event["object"]
                    self.reaping.wait()
                    if pod.metadata.deletion_timestamp is not None:
                        with contextlib.suppress(ApiException):
                            self.core.delete_namespaced_pod(
                                pod.metadata.name, self.namespace, grace_period_seconds=0
                            )
                    if self._stop.is_set():
                        return
            except Exception:  # the namespace may be going away; keep reaping until closed
                if self._stop.wait(0.2):
                    return
