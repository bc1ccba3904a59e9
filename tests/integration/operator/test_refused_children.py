"""What the real API server makes of the objects a job asks for.

Covers: the longest name the CRD admits runs, and its pods, Service, Lease, ServiceAccount, Role
and RoleBinding are created; the worst case (longest name, last epoch, last rank, standby index)
passes the API server's own validation (server-side dry run), and the Role naming every report
Lease of a job at `MAX_NODES` is stored; and a child the API server refuses
as Invalid although the job was admitted (a container port name the CRD passes through) gives a
ConfigurationError condition and a Warning event in the API server's words, is not retried for
the same spec however often the job is reconciled, and is tried again once the spec is fixed; in
a namespace enforcing the `restricted` Pod Security level, the node pods and the standby of a
template that meets it are admitted, and a template that does not is a ConfigurationError.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from harness.controlplane import wait_until
from harness.jobs import operator_job
from phalanx.models import names
from phalanx.models.job import TrainingJob
from phalanx.models.report_shards import shards_for
from phalanx.operator import builder
from tests.integration.operator.conftest import Cluster

LONGEST = ("a-job-with-the-longest-name-phalanx-admits-" + "x" * 50)[: names.MAX_NAME_LENGTH]
BAD_PORT = [{"name": "trainer", "image": "phalanx/trainer:test",
             "ports": [{"name": "Bad_Port", "containerPort": 29500}]}]  # fmt: skip
API_WORDS = 'spec.containers[0].ports[0].name: Invalid value: "Bad_Port"'


def refused_pod_creates(api: k8s.ApiClient) -> float:
    """Pod creates the API server answered 422, by its own request counter."""
    text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name == "apiserver_request_total" and sample.labels.get("verb") == "POST" \
                    and sample.labels.get("resource") == "pods" \
                    and sample.labels.get("code") == "422":  # fmt: skip
                total += sample.value
    return total


def reconciles(cluster: Cluster) -> float:
    return cluster.metric("phalanx_reconcile_duration_seconds_count")


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def refused_by_the_api_server(cluster: Cluster, job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's status once its ConfigurationError says the API server refused a child, and
    that condition."""
    status = cluster.wait_status(
        job,
        lambda s: condition(s, "ConfigurationError").get("status") == "True",
        "a ConfigurationError condition",
    )
    refused = condition(status, "ConfigurationError")
    assert refused["reason"] == "RefusedByAPIServer"
    return status, refused


def test_longest_allowed_name_runs_with_all_its_children(cluster: Cluster) -> None:
    assert len(LONGEST) == names.MAX_NAME_LENGTH
    cluster.create_job(LONGEST)
    pods = cluster.kubelet.start_gang(LONGEST, 1, 4)
    cluster.wait_status(LONGEST, lambda s: s.get("phase") == "Running", "Running")
    assert pods[3].spec.hostname == f"{LONGEST}-1-3"
    assert pods[3].spec.subdomain == LONGEST
    core, ns = k8s.CoreV1Api(cluster.api), cluster.namespace
    assert core.read_namespaced_service(LONGEST, ns).spec.cluster_ip == "None"
    assert core.read_namespaced_service_account(f"{LONGEST}-phalanx", ns)
    rbac = k8s.RbacAuthorizationV1Api(cluster.api)
    assert rbac.read_namespaced_role(f"{LONGEST}-phalanx", ns)
    assert rbac.read_namespaced_role_binding(f"{LONGEST}-phalanx", ns)
    lease = k8s.CoordinationV1Api(cluster.api).read_namespaced_lease(f"{LONGEST}-heartbeat", ns)
    assert lease.metadata.labels["phalanx.dev/job"] == LONGEST


def test_last_epoch_and_rank_pass_the_api_servers_validation(cluster: Cluster) -> None:
    """What the operator would create at the bounds, validated by the API server (dry run)."""
    created = cluster.create_job(LONGEST, replicas={"min": 1, "max": names.MAX_NODES})
    job = TrainingJob.from_stored(created)
    settings = builder.BuildSettings()
    epoch, rank = names.MAX_EPOCH, names.MAX_NODES - 1
    core, ns = k8s.CoreV1Api(cluster.api), cluster.namespace
    pod = builder.node_pod(job, epoch, rank, names.MAX_NODES, settings, pod_group=True)
    standby = builder.standby_pod(job, epoch, names.MAX_NODES, settings)
    for body in (pod, standby):
        core.create_namespaced_pod(ns, body, dry_run="All")
    assert len(pod["spec"]["hostname"]) == names.DNS_LABEL_MAX
    # The Role naming every report Lease at the bounds is stored (etcd keeps 1.5 MiB an object;
    # a dry run never reaches it), under a name of its own: the operator may be making the job's.
    role = builder.role(job)
    role["metadata"]["name"] = "the-role-at-the-bounds"
    rbac = k8s.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(ns, role)
    stored = rbac.read_namespaced_role("the-role-at-the-bounds", ns)
    assert len(stored.rules[0].resource_names) == shards_for(names.MAX_NODES)


def test_invalid_child_is_a_configuration_error_not_a_retry_loop(cluster: Cluster) -> None:
    before = refused_pod_creates(cluster.api)
    manifest = operator_job("bad-port")
    manifest["spec"]["template"]["spec"]["containers"] = BAD_PORT
    cluster.custom.create_namespaced_custom_object(
        "phalanx.dev", "v1alpha1", cluster.namespace, "trainingjobs", manifest
    )
    status, refused = refused_by_the_api_server(cluster, "bad-port")
    assert refused["message"].startswith("the API server refused Pod bad-port-1-0: ")
    assert API_WORDS in refused["message"]
    assert refused["observedGeneration"] == 1
    assert status["phase"] == "Pending"
    assert status["restarts"]["total"] == 0
    cluster.wait_event("bad-port", "ConfigurationError")
    warnings = [m for t, r, m in cluster.events("bad-port") if (t, r) == ("Warning", "ConfigurationError")]  # fmt: skip
    assert warnings == [refused["message"]]

    # Reconciles come and go (each annotation change wakes the job): nothing is created again.
    assert refused_pod_creates(cluster.api) == before + 1
    for i in range(3):
        seen = reconciles(cluster)
        cluster.custom.patch_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", cluster.namespace, "trainingjobs", "bad-port",
            {"metadata": {"annotations": {"test/poke": str(i)}}},
        )  # fmt: skip
        wait_until(lambda s=seen: reconciles(cluster) > s, 10, f"reconcile after poke {i}")
    assert refused_pod_creates(cluster.api) == before + 1
    assert cluster.kubelet.pods("bad-port") == {}
    assert len([e for e in cluster.events("bad-port") if e[1] == "ConfigurationError"]) == 1

    # The user fixes the template: a new generation, and the job tries again.
    fixed = [{**BAD_PORT[0], "ports": [{"name": "rendezvous", "containerPort": 29500}]}]
    cluster.patch_spec("bad-port", {"template": {"spec": {"containers": fixed}}})
    cluster.kubelet.start_gang("bad-port", 1, 4)
    status = cluster.wait_status("bad-port", lambda s: s.get("phase") == "Running", "Running")
    assert condition(status, "ConfigurationError")["status"] == "False"
    assert condition(status, "ConfigurationError")["reason"] == "SpecChanged"
    assert refused_pod_creates(cluster.api) == before + 1


RESTRICTED_TEMPLATE = {"spec": {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "trainer", "image": "phalanx/trainer:test", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
}}  # fmt: skip


def test_pod_security_admission_admits_every_pod_of_a_restricted_template(cluster: Cluster) -> None:
    """In a namespace that enforces `restricted`, the API server's own PodSecurity admission
    admits the node pods and the standby of a template that meets the level; a template that
    does not is a ConfigurationError in the admission's words, not a create retried forever."""
    core = k8s.CoreV1Api(cluster.api)
    level = "pod-security.kubernetes.io/enforce"
    core.patch_namespace(cluster.namespace, {"metadata": {"labels": {level: "restricted"}}})
    try:
        cluster.create_job("secure", replicas={"min": 2, "max": 2}, spares=1,
                           template=RESTRICTED_TEMPLATE)  # fmt: skip
        cluster.kubelet.start_gang("secure", 1, 2)
        wait_until(lambda: cluster.kubelet.pods("secure", role="standby"), 20, "the standby pod")
        status = cluster.wait_status("secure", lambda s: s.get("phase") == "Running", "Running")
        assert condition(status, "ConfigurationError") == {}

        cluster.create_job("insecure", replicas={"min": 2, "max": 2})
        _, refused = refused_by_the_api_server(cluster, "insecure")
        assert 'violates PodSecurity "restricted' in refused["message"]
        assert cluster.kubelet.pods("insecure") == {}
    finally:
        core.patch_namespace(cluster.namespace, {"metadata": {"labels": {level: None}}})
