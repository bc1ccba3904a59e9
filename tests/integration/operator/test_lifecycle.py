"""A job's life apart from failures: success and TTL, suspend and resume.

Scenarios 7 and 9 of the operator issue, and the assignment Lease a job starts with.
"""

from __future__ import annotations

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from harness.controlplane import wait_until
from harness.jobs import operator_job
from phalanx.models import labels
from phalanx.models.assignment import EpochAssignment
from phalanx.models.job import GROUP, PLURAL, VERSION
from phalanx.models.names import assignment_lease_name
from phalanx.operator.handlers import FINALIZER
from tests.integration.operator.conftest import Cluster


def test_all_ranks_exit_0_then_ttl_deletes_the_job(cluster: Cluster) -> None:
    cluster.create_job("done", ttlSecondsAfterFinished=2)
    pods = cluster.kubelet.start_gang("done", 1, 4)
    cluster.wait_status("done", lambda s: s.get("phase") == "Running", "Running")
    for pod in pods.values():
        cluster.kubelet.exit(pod.metadata.name, 0, reason="Completed")
    status = cluster.wait_status("done", lambda s: s.get("phase") == "Succeeded", "Succeeded")
    assert status["completionTime"]
    assert next(c for c in status["conditions"] if c["type"] == "Succeeded")["status"] == "True"
    cluster.wait_event("done", "Succeeded")

    wait_until(lambda: _gone(cluster, "done"), 30, "the TTL to delete the job")


def test_suspend_deletes_pods_and_resume_starts_a_new_epoch(cluster: Cluster) -> None:
    cluster.create_job("pause")
    cluster.kubelet.start_gang("pause", 1, 4)
    cluster.wait_status("pause", lambda s: s.get("phase") == "Running", "Running")
    cluster.patch_spec("pause", {"suspend": True})
    status = cluster.wait_status("pause", lambda s: s.get("phase") == "Suspended", "Suspended")
    assert next(c for c in status["conditions"] if c["type"] == "Suspended")["status"] == "True"
    wait_until(lambda: cluster.kubelet.pods("pause") == {}, 30, "the pods to be deleted")

    cluster.patch_spec("pause", {"suspend": False})
    status = cluster.wait_status("pause", lambda s: s.get("epoch") == 2, "a new epoch on resume")
    assert next(c for c in status["conditions"] if c["type"] == "Suspended")["status"] == "False"
    cluster.kubelet.start_gang("pause", 2, 4)
    cluster.wait_status("pause", lambda s: s.get("phase") == "Running", "Running again")
    cluster.wait_event("pause", "Suspended")
    cluster.wait_event("pause", "Resumed")
    assert cluster.status("pause")["restarts"]["total"] == 0


def test_the_assignment_lease_is_made_with_its_first_assignment(cluster: Cluster) -> None:
    """The assignment Lease is no longer one of the children made before the pods: the first
    publication creates it with epoch 1's assignment on it (one write, not a create and a patch)."""
    cluster.create_job("first")
    cluster.kubelet.start_gang("first", 1, 4)
    cluster.wait_status("first", lambda s: s.get("phase") == "Running", "Running")
    lease = k8s.CoordinationV1Api(cluster.api).read_namespaced_lease(
        assignment_lease_name("first"), cluster.namespace
    )
    assignment = EpochAssignment.model_validate_json(lease.metadata.annotations[labels.ASSIGNMENT])
    assert (assignment.epoch, assignment.nodes) == (1, 4)
    assert sorted(assignment.ranks.values()) == [0, 1, 2, 3]


def test_jobs_carry_no_finalizer_and_one_left_by_an_older_operator_does_not_hold_a_delete(
    cluster: Cluster,
) -> None:
    """The jobs' loops are the operator's own (`loops`): a job runs without kopf's finalizer,
    and a job an older operator's daemon put it on is still deleted (kopf takes it off)."""
    cluster.create_job("plain")
    cluster.kubelet.start_gang("plain", 1, 4)
    cluster.wait_status("plain", lambda s: s.get("phase") == "Running", "Running")
    assert not cluster.job("plain")["metadata"].get("finalizers")

    manifest = operator_job("older")
    manifest["metadata"]["finalizers"] = [FINALIZER]
    cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, cluster.namespace, PLURAL, manifest
    )
    cluster.kubelet.start_gang("older", 1, 4)
    cluster.wait_status("older", lambda s: s.get("phase") == "Running", "Running")
    cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, cluster.namespace, PLURAL, "older"
    )

    wait_until(
        lambda: _gone(cluster, "older"), 30, "the job with an older operator's finalizer to go"
    )


def _gone(cluster: Cluster, name: str) -> bool:
    try:
        cluster.job(name)
    except ApiException as error:
        return bool(error.status == 404)
    return False
