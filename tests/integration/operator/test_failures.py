"""Failures restart the gang in a new epoch, counted by class, until the budget runs out.

Scenarios 2, 3 and 8 of the operator issue.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from phalanx.models import labels
from tests.integration.operator.conftest import Cluster


class PodTimeline:
    """Records ADDED and DELETED pod events of one job, in the order the API server sent them."""

    def __init__(self, cluster: Cluster, job: str) -> None:
        self.events: list[tuple[str, int, str]] = []
        self._stopped = threading.Event()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(cluster, job), daemon=True)
        self._thread.start()

    def _run(self, cluster: Cluster, job: str) -> None:
        try:
            self._record(cluster, job)
        except Exception:  # the stream breaks when stop() closes it mid-read
            if not self._stopped.is_set():
                raise

    def _record(self, cluster: Cluster, job: str) -> None:
        core = k8s.CoreV1Api(cluster.api)
        for event in self._watch.stream(core.list_namespaced_pod, cluster.namespace,
                                        label_selector=f"{labels.JOB}={job},{labels.ROLE}=node", timeout_seconds=120):  # fmt: skip
            pod = event["object"]
            if event["type"] in ("ADDED", "DELETED"):
                self.events.append(
                    (event["type"], int(pod.metadata.labels[labels.EPOCH]), pod.metadata.name)
                )

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()


def test_application_failure_restarts_at_the_same_size_old_pods_first(cluster: Cluster) -> None:
    cluster.create_job("app")
    cluster.kubelet.start_gang("app", 1, 4)
    cluster.wait_status("app", lambda s: s.get("phase") == "Running", "Running")
    timeline = PodTimeline(cluster, "app")
    cluster.kubelet.exit("app-1-1", 1, message="Traceback: ZeroDivisionError")

    status = cluster.wait_status("app", lambda s: s.get("epoch") == 2, "epoch 2")
    assert (status["nodes"], status["worldSize"]) == (4, 8)
    assert status["restarts"] == {"application": 1, "infrastructure": 0, "total": 1}
    failure = status["failures"][-1]
    assert (failure["class"], failure["reason"], failure["pod"], failure["exitCode"]) == (
        "application",
        "Error",
        "app-1-1",
        1,
    )
    assert "ZeroDivisionError" in failure["message"]
    cluster.kubelet.start_gang("app", 2, 4)
    cluster.wait_status("app", lambda s: s.get("phase") == "Running", "Running again")
    timeline.stop()

    deleted_old = [
        i for i, (kind, epoch, _) in enumerate(timeline.events) if kind == "DELETED" and epoch == 1
    ]
    added_new = [
        i for i, (kind, epoch, _) in enumerate(timeline.events) if kind == "ADDED" and epoch == 2
    ]
    assert len(deleted_old) == 4, timeline.events
    assert len(added_new) == 4, timeline.events
    assert max(deleted_old) < min(added_new), "epoch-2 pods existed before epoch-1 pods were gone"
    cluster.wait_event("app", "Restart")
    cluster.wait_metric(
        "phalanx_restarts_total",
        1,
        namespace=cluster.namespace,
        job="app",
        **{"class": "application"},
    )
    assert cluster.metric("phalanx_recovery_seconds_count", **{"class": "application"}) == 0
    cluster.kubelet.heartbeat("app", {"epoch": 2, "step": 1})  # the new epoch trains: recovered
    cluster.wait_status("app", lambda s: s.get("recoveringSince") is None, "recovered")
    cluster.wait_metric("phalanx_recovery_seconds_count", 1, **{"class": "application"})


def _oom(cluster: Cluster, pod: str) -> None:
    cluster.kubelet.exit(pod, 137, reason="OOMKilled")


def _evict(cluster: Cluster, pod: str) -> None:
    cluster.kubelet.evict(pod)


def _delete(cluster: Cluster, pod: str) -> None:
    cluster.kubelet.delete(pod)


def _node_not_ready(cluster: Cluster, pod: str) -> None:
    node = k8s.CoreV1Api(cluster.api).read_namespaced_pod(pod, cluster.namespace).spec.node_name
    cluster.kubelet.set_node_ready(node, False)


@pytest.mark.parametrize(
    ("break_pod", "reason"),
    [
        (_oom, "OOMKilled"),
        (_evict, "Evicted"),
        (_delete, "PodDeleted"),
        (_node_not_ready, "NodeNotReady"),
    ],
    ids=["oom", "eviction", "external-delete", "node-not-ready"],
)
def test_infrastructure_failures_restart_and_are_counted_apart(
    cluster: Cluster, break_pod: Any, reason: str
) -> None:
    cluster.create_job("infra")
    cluster.kubelet.start_gang("infra", 1, 4)
    cluster.wait_status("infra", lambda s: s.get("phase") == "Running", "Running")
    break_pod(cluster, "infra-1-2")
    status = cluster.wait_status("infra", lambda s: s.get("epoch") == 2, "epoch 2")
    assert status["restarts"] == {"application": 0, "infrastructure": 1, "total": 1}
    assert status["failures"][-1]["class"] == "infrastructure"
    assert status["failures"][-1]["reason"] == reason
    # A node that is gone costs its rank at once (one restart at the size that runs now, no
    # wait for a replacement); a failed pod on a healthy node is replaced at the same size.
    nodes = 3 if reason == "NodeNotReady" else 4
    assert status["nodes"] == nodes
    cluster.kubelet.start_gang("infra", 2, nodes, nodes=["node-0", "node-1", "node-4", "node-5"])
    cluster.wait_status("infra", lambda s: s.get("phase") == "Running", "Running again")
    cluster.wait_metric(
        "phalanx_restarts_total",
        1,
        namespace=cluster.namespace,
        job="infra",
        **{"class": "infrastructure"},
    )
    assert (
        cluster.metric(
            "phalanx_restarts_total",
            namespace=cluster.namespace,
            job="infra",
            **{"class": "application"},
        )
        == 0
    )


def test_exhausted_budget_fails_naming_the_last_failure(cluster: Cluster) -> None:
    cluster.create_job("budget", failurePolicy={"maxRestarts": 1})
    cluster.kubelet.start_gang("budget", 1, 4)
    cluster.kubelet.exit("budget-1-0", 1)
    cluster.wait_status("budget", lambda s: s.get("epoch") == 2, "epoch 2")
    cluster.kubelet.start_gang("budget", 2, 4)
    cluster.kubelet.exit("budget-2-3", 7)
    status = cluster.wait_status("budget", lambda s: s.get("phase") == "Failed", "Failed")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "RestartBudgetExhausted"
    assert "maxRestarts (1) exhausted" in failed["message"]
    assert "budget-2-3" in failed["message"]
    assert status["completionTime"]
    cluster.wait_event("budget", "BudgetExhausted")
    cluster.wait_metric("phalanx_jobs", 1, phase="Failed")
