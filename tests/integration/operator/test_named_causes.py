"""Common mistakes in a job's pod template, named in its conditions within seconds, on the real
API server.

Covers: a misspelt container field (`resourcs:`) is refused by strict field validation, so no pod
runs without it, and ConfigurationError names the field in the API server's words; a pod the
scheduler cannot place (here the test's
kubelet writes the scheduler's PodScheduled condition, as kube-scheduler does for a missing
claim) puts the scheduler's own reason in Unschedulable within 10 s, not after
scheduleTimeoutSeconds. (A missing ServiceAccount needs the API server's ServiceAccount
admission, which this control plane leaves off: tests/e2e/test_named_causes.py, on kind.)
"""

from __future__ import annotations

from typing import Any

from tests.integration.operator.conftest import Cluster

CONTAINER = {"name": "trainer", "image": "phalanx/trainer:test"}
NO_CLAIM = '0/3 nodes are available: persistentvolumeclaim "phalanx-checkpoints" not found.'


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def named_within_10_s(cluster: Cluster, job: str, kind: str, words: str = "") -> dict[str, Any]:
    """The job's condition `kind` once it is True and says `words` (10 s at the most)."""

    def named(status: dict[str, Any]) -> bool:
        found = condition(status, kind)
        return found.get("status") == "True" and words in found.get("message", "")

    return condition(cluster.wait_status(job, named, f"a {kind} condition", 10), kind)


def test_a_misspelt_container_field_is_refused_and_named(cluster: Cluster) -> None:
    misspelt = {**CONTAINER, "resourcs": {"limits": {"nvidia.com/gpu": "8"}}}
    cluster.create_job("misspelt", template={"spec": {"containers": [misspelt]}})
    refused = named_within_10_s(cluster, "misspelt", "ConfigurationError")
    assert refused["reason"] == "RefusedByAPIServer"
    assert 'unknown field "spec.containers[0].resourcs"' in refused["message"], refused
    assert cluster.kubelet.pods("misspelt") == {}, "no pod runs without the field"


def test_an_unschedulable_pod_names_the_schedulers_reason_at_once(cluster: Cluster) -> None:
    cluster.create_job("no-claim", replicas={"min": 2, "max": 2})
    pods = cluster.kubelet.wait_pods("no-claim", 1, 2)
    for pod in pods.values():
        cluster.kubelet.set_status(pod.metadata.name, {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": NO_CLAIM}]})  # fmt: skip
    # The kubelet here writes one pod at a time: the condition names one, then both.
    unschedulable = named_within_10_s(cluster, "no-claim", "Unschedulable", "(and 1 more pods)")
    assert unschedulable["reason"] == "PodUnschedulable"
    assert unschedulable["message"] == f"pod no-claim-1-0 (and 1 more pods): {NO_CLAIM}"
