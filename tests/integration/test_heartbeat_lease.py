"""The agent's Lease sink, with the pod's own service-account token, against the real API server:
the operator's Role lets a job's pods update only that job's heartbeat Lease, and what the agent
writes is what the operator reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane
from harness.jobs import job_model
from phalanx.agent.kubeapi import KubeAPI, KubeError
from phalanx.agent.lease_channel import LeaseReports
from phalanx.agent.sinks import LeaseSink
from phalanx.agent.wire import Report
from phalanx.models import TrainingJob
from phalanx.models.heartbeat import Heartbeat
from phalanx.models.report_shards import SHARED_RANKS, report_lease
from phalanx.operator import builder, observe
from phalanx.operator.cluster.report_leases import grant_shards


def unowned(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["metadata"].pop("ownerReferences")
    return manifest


def test_pods_update_only_their_jobs_lease(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    core, rbac, leases = (
        k8s.CoreV1Api(kube_client),
        k8s.RbacAuthorizationV1Api(kube_client),
        k8s.CoordinationV1Api(kube_client),
    )
    one = {"min": 1, "max": 1}
    jobs = [
        job_model(name, namespace=namespace, metadata={"uid": f"uid-{name}"}, replicas=one)
        for name in ("mine", "other")
    ]
    for job in jobs:  # the jobs are not stored, so nothing may claim them as owner (GC runs)
        core.create_namespaced_service_account(namespace, unowned(builder.service_account(job)))
        rbac.create_namespaced_role(namespace, unowned(builder.role(job)))
        rbac.create_namespaced_role_binding(namespace, unowned(builder.role_binding(job)))
        leases.create_namespaced_lease(namespace, unowned(builder.heartbeat_lease(job)))
    request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token(
        "mine-phalanx", namespace, request
    ).status.token
    as_pod = KubeAPI(control_plane.server, token=token, ca_file=control_plane.pki.ca_cert)
    beat = Heartbeat(epoch=3, step=42, loss=1.5, rank_step_seconds=[0.1, 0.2], window_steps=20)
    raw = beat.model_dump_json(by_alias=True, exclude_none=True)
    LeaseSink(namespace, "mine-heartbeat", "mine-3-0", api=as_pod).publish(raw)
    with pytest.raises(KubeError) as denied:
        LeaseSink(namespace, "other-heartbeat", "mine-3-0", api=as_pod).publish(raw)
    assert denied.value.status == 403

    stored = leases.read_namespaced_lease("mine-heartbeat", namespace)
    assert stored.spec.holder_identity == "mine-3-0"
    body = kube_client.sanitize_for_serialization(stored)
    assert observe.heartbeat(body) == beat
    # The agent's renewal, as the operator reads it (a still step is a hang only while renewed).
    facts = observe.lease_facts(body)
    assert facts is not None
    assert facts.renewed is not None
    assert abs((datetime.now(UTC) - facts.renewed).total_seconds()) < 30


def test_a_grown_jobs_role_grants_its_new_report_leases(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    """The Role made for a job of the nodes that share the heartbeat Lease is patched to name
    the report Leases of 4 more: the pods may then write them (what `_ensure_children` does when the Role already existed)."""
    core, rbac = k8s.CoreV1Api(kube_client), k8s.RbacAuthorizationV1Api(kube_client)
    leases = k8s.CoordinationV1Api(kube_client)

    def sized(nodes: int) -> TrainingJob:
        replicas = {"min": 1, "max": nodes}
        return job_model(
            "grown", namespace=namespace, metadata={"uid": "uid-grown"}, replicas=replicas
        )

    core.create_namespaced_service_account(namespace, unowned(builder.service_account(sized(1))))
    rbac.create_namespaced_role(namespace, unowned(builder.role(sized(SHARED_RANKS))))
    rbac.create_namespaced_role_binding(namespace, unowned(builder.role_binding(sized(1))))
    for manifest in builder.report_leases(sized(SHARED_RANKS + 4)):
        leases.create_namespaced_lease(namespace, unowned(manifest))
    request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token(
        "grown-phalanx", namespace, request
    ).status.token
    as_pod = KubeAPI(control_plane.server, token=token, ca_file=control_plane.pki.ca_cert)
    pod = f"grown-1-{SHARED_RANKS + 2}"
    report = Report(pod, "running", datetime.now(UTC), 1)
    with pytest.raises(KubeError) as denied:
        LeaseReports(namespace, "grown-heartbeat", api=as_pod).publish(report)
    assert denied.value.status == 403, "not yet granted"

    grant_shards(rbac, sized(SHARED_RANKS + 4))
    LeaseReports(namespace, "grown-heartbeat", api=as_pod).publish(report)
    stored = leases.read_namespaced_lease(report_lease("grown-heartbeat", pod), namespace)
    facts = observe.lease_facts(kube_client.sanitize_for_serialization(stored))
    assert facts is not None
    assert set(facts.reports) == {pod}
