"""The chart's RBAC on the real API server: the operator and the API service, each running with
only its ServiceAccount's token and the rights the chart renders, do their whole job, and
nothing they do is refused.

Covers: the chart's ServiceAccounts, ClusterRoles, Roles and bindings (operator.namespaces set,
so the per-namespace Roles and the cluster-scoped ClusterRole); the operator runs a gang job
through a restart, suspend and resume to success and TTL deletion, with the job's PodGroup
and its children (Service, ServiceAccount, Role, RoleBinding, Lease: the escalation check),
under OwnerReferencesPermissionEnforcement, and no kopf or operator log says it was refused;
the API service lists, creates, gets, scales, suspends, resumes, deletes and reads a job's
events for a caller; the `helm test` smoke script passes against both.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import utils as k8s_utils
from kubernetes.client.exceptions import ApiException

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from harness.rbac import grant, grant_jobs, identity
from phalanx.operator.cluster import kube, status_write
from phalanx.operator.metrics import OperatorMetrics
from tests.integration.operator.conftest import Cluster, operator_settings
from tests.support.apiserver import running_api
from tests.support.chart import CHART, Helm, Manifest, build_helm, of_kind
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_thread

SMOKE_TEST = CHART / "files/smoke-test.py"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
REFUSED = ("forbidden", "not enough permissions", "failed to post an event", " 403")


@dataclass
class Installed:
    """The chart's identities, installed, with credentials for each component's account."""

    release: str
    namespace: str
    accounts: dict[str, str]
    """component -> ServiceAccount name"""
    tokens: dict[str, str]
    """component -> a TokenRequest token of its ServiceAccount"""


def token_for(kube_client: k8s.ApiClient, namespace: str, account: str) -> str:
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    core = k8s.CoreV1Api(kube_client)
    return str(
        core.create_namespaced_service_account_token(account, namespace, request).status.token
    )


def kubeconfig_for(control_plane: ControlPlane, user: str, path: Path) -> Path:
    """A kubeconfig whose user is `user` (YAML flow mapping of its credentials)."""
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{control_plane.server}", certificate-authority: "{control_plane.pki.ca_cert}"}}
users:
- name: chart
  user: {user}
contexts:
- name: chart
  context: {{cluster: test, user: chart}}
current-context: chart
"""
    )
    return path


def token_kubeconfig(control_plane: ControlPlane, token: str, path: Path) -> Path:
    """What a pod has: its ServiceAccount's token (the operator reads no other credential)."""
    return kubeconfig_for(control_plane, f'{{token: "{token}"}}', path)


@pytest.fixture(scope="module")
def helm() -> Helm:
    return build_helm()


@pytest.fixture
def installed(
    helm: Helm,
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
) -> Iterator[Installed]:
    """The chart's RBAC objects, released in `namespace` and watching only it."""
    release = f"r{uuid.uuid4().hex[:8]}"
    rendered = helm.render(
        f"operator.namespaces={{{namespace}}}", release=release, namespace=namespace
    )
    objects: list[Manifest] = [m for m in rendered if m["kind"] in RBAC_KINDS]
    assert {m["kind"] for m in objects} == set(RBAC_KINDS)
    for manifest in objects:
        k8s_utils.create_from_dict(kube_client, manifest)
    accounts = {
        m["metadata"]["labels"]["app.kubernetes.io/component"]: m["metadata"]["name"]
        for m in of_kind(objects, "ServiceAccount")
    }
    tokens = {c: token_for(kube_client, namespace, a) for c, a in accounts.items()}
    try:
        yield Installed(release, namespace, accounts, tokens)
    finally:
        rbac = k8s.RbacAuthorizationV1Api(kube_client)
        for manifest in of_kind(objects, "ClusterRoleBinding"):
            rbac.delete_cluster_role_binding(manifest["metadata"]["name"])
        for manifest in of_kind(objects, "ClusterRole"):
            rbac.delete_cluster_role(manifest["metadata"]["name"])


@pytest.fixture
def kubelet(kube_client: k8s.ApiClient, namespace: str) -> Iterator[FakeKubelet]:
    kubelet = FakeKubelet(kube_client, namespace)
    kubelet.add_nodes(*(f"node-{i}" for i in range(4)))
    yield kubelet
    kubelet.close()


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log lines where the operator or kopf says the API server refused it."""
    lines = [f"{r.name}: {r.getMessage()}" for r in caplog.records]
    return [line for line in lines if any(word in line.lower() for word in REFUSED)]


def test_the_operator_hands_kopf_a_service_account_token(
    installed: Installed, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """In a cluster the operator has only its ServiceAccount's token; kopf must use it."""
    token = installed.tokens["operator"]
    kubeconfig = token_kubeconfig(control_plane, token, tmp_path / "token.yaml")
    connection = kube.connection_info(kube.load_configuration(kubeconfig))
    assert connection.scheme == "Bearer"
    assert connection.token == token


def test_the_operator_runs_a_job_through_its_life_with_only_the_charts_rights(
    podgroup_crd: None,
    installed: Installed,
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.INFO)
    kubeconfig = token_kubeconfig(
        control_plane, installed.tokens["operator"], tmp_path / "operator.kubeconfig"
    )
    settings = operator_settings(control_plane, namespace, kubeconfig=kubeconfig)
    metrics = OperatorMetrics()
    with operator_thread(settings, metrics):
        cluster = Cluster(namespace, kube_client, kubelet, metrics, settings)
        cluster.custom.create_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs",
            operator_job(
                "rbac", gang=True, schedulerName="scheduler-plugins-scheduler",
                ttlSecondsAfterFinished=1,
            ),
        )  # fmt: skip
        pods = kubelet.start_gang("rbac", 1, 4)
        cluster.wait_status("rbac", lambda s: s.get("phase") == "Running", "Running")
        assert_children_exist(kube_client, namespace, "rbac")

        kubelet.exit(pods[1].metadata.name, 1)  # an application failure: a new epoch
        cluster.wait_status("rbac", lambda s: s.get("epoch") == 2, "epoch 2 after the failure")
        pods = kubelet.start_gang("rbac", 2, 4)
        cluster.wait_status("rbac", lambda s: s.get("phase") == "Running", "Running again")
        custom = k8s.CustomObjectsApi(kube_client)
        group = custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "rbac"
        )
        assert group["spec"]["minMember"] == 4

        cluster.patch_spec("rbac", {"suspend": True})
        cluster.wait_status("rbac", lambda s: s.get("phase") == "Suspended", "Suspended")
        wait_until(lambda: kubelet.pods("rbac") == {}, 30, "the pods to be deleted")
        cluster.patch_spec("rbac", {"suspend": False})
        cluster.wait_status("rbac", lambda s: s.get("epoch") == 3, "epoch 3 on resume")
        pods = kubelet.start_gang("rbac", 3, 4)
        cluster.wait_status("rbac", lambda s: s.get("phase") == "Running", "Running at 3")
        for pod in pods.values():
            kubelet.exit(pod.metadata.name, 0, reason="Completed")
        cluster.wait_status("rbac", lambda s: s.get("phase") == "Succeeded", "Succeeded")
        cluster.wait_event("rbac", "Succeeded")
        wait_until(lambda: job_gone(cluster), 30, "the TTL to delete the job")
        # a job whose status write is refused is read, to tell deleted from changed
        with k8s_config.new_client_from_config(config_file=str(kubeconfig)) as as_operator:
            assert status_write.gone(k8s.CustomObjectsApi(as_operator), namespace, "rbac")
    assert not refusals(caplog), "\n".join(refusals(caplog))


def assert_children_exist(api: k8s.ApiClient, namespace: str, job: str) -> None:
    """What the cluster room's ensure_children created with the operator's identity."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    account = core.read_namespaced_service_account(f"{job}-phalanx", namespace)
    role = rbac.read_namespaced_role(f"{job}-phalanx", namespace)
    assert role.rules[0].verbs == ["get", "update", "patch"]
    rbac.read_namespaced_role_binding(f"{job}-phalanx", namespace)
    k8s.CoordinationV1Api(api).read_namespaced_lease(f"{job}-heartbeat", namespace)
    service = core.read_namespaced_service(job, namespace)
    for child in (account, role, service):
        assert child.metadata.owner_references[0].block_owner_deletion is True


def job_gone(cluster: Cluster) -> bool:
    try:
        cluster.job("rbac")
    except ApiException as error:
        return bool(error.status == 404)
    return False


@pytest.fixture
def chart_api(installed: Installed, control_plane: ControlPlane) -> Iterator[str]:
    """The API service with the chart's identity for the API service as its own."""
    configuration = k8s.Configuration()
    configuration.host = control_plane.server
    configuration.ssl_ca_cert = str(control_plane.pki.ca_cert)
    configuration.api_key = {"authorization": f"Bearer {installed.tokens['api']}"}
    api = k8s.ApiClient(configuration)
    try:
        with running_api(api, authz_cache_seconds=0.0) as url:
            yield url
    finally:
        api.close()


def test_the_api_service_serves_a_caller_with_only_the_charts_rights(
    chart_api: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    alice = identity(kube_client, namespace, "alice")
    grant_jobs(kube_client, namespace, alice)
    grant(kube_client, namespace, alice, "observe", [
        k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"]),
        k8s.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ])  # fmt: skip
    body: dict[str, Any] = operator_job("served")
    with httpx.Client(base_url=f"{chart_api}/api/v1", headers=alice.headers, timeout=10) as api:
        jobs = f"/namespaces/{namespace}/jobs"
        created = api.post(jobs, json=body)
        assert created.status_code == 201, created.text

        def listed() -> bool:
            page = api.get("/jobs", params={"namespace": namespace})
            assert page.status_code == 200, page.text
            return [j["name"] for j in page.json()["items"]] == ["served"]

        wait_until(listed, 10, "the job in the service's watch cache")
        for method, path, payload in [
            ("GET", f"{jobs}/served", None),
            ("PUT", f"{jobs}/served/scale", {"nodes": 3}),
            ("POST", f"{jobs}/served/suspend", None),
            ("POST", f"{jobs}/served/resume", None),
            ("GET", f"{jobs}/served/events", None),
        ]:
            response = api.request(method, path, json=payload)
            assert response.status_code == 200, f"{method} {path}: {response.text}"
        job = k8s.CustomObjectsApi(kube_client).get_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs", "served"
        )
        assert job["spec"]["replicas"]["desired"] == 3
        assert job["spec"].get("suspend") is False
        # pods/log: the status names node 0's pod of epoch 1, which no kubelet runs here, so
        # the API server answers the service's log request with 404 (403 without the right).
        custom = k8s.CustomObjectsApi(kube_client)
        custom.patch_namespaced_custom_object_status(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs", "served",
            {"status": {"epoch": 1, "nodes": 2}},
        )  # fmt: skip
        wait_until(
            lambda: api.get(f"{jobs}/served").json()["status"].get("epoch") == 1,
            10,
            "the status in the service's cache",
        )
        logs = api.get(f"{jobs}/served/logs", params={"node": 0})
        assert logs.status_code == 404, logs.text
        assert logs.json()["detail"] == 'pods "served-1-0" not found'
        deleted = api.delete(f"{jobs}/served")
        assert deleted.status_code in (200, 202, 204), deleted.text


def test_the_helm_test_smoke_script_passes_against_the_chart_identities(
    chart_api: str, control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    tester = identity(kube_client, namespace, "smoke-test")  # no Role, like the test pod's
    token, api_token = tmp_path / "token", tmp_path / "api-token"
    token.write_text(tester.kube_token)  # the pod's own token, for the kube API
    api_token.write_text(tester.token)  # its projected token, for the service's audience
    env = {
        **os.environ,
        "KUBE_API_URL": control_plane.server,
        "KUBE_TOKEN_FILE": str(token),
        "PHALANX_API_TOKEN_FILE": str(api_token),
        "KUBE_CA_FILE": str(control_plane.pki.ca_cert),
        "PHALANX_API_URL": chart_api,
        "POD_NAMESPACE": namespace,
        "SMOKE_TIMEOUT_SECONDS": "10",
    }
    result = subprocess.run(
        [sys.executable, str(SMOKE_TEST)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the API service reviewed this pod's token (403)" in result.stdout
    assert "serves trainingjobs.phalanx.dev" in result.stdout

    env["KUBE_TOKEN_FILE"] = str(tmp_path / "bad-token")
    Path(env["KUBE_TOKEN_FILE"]).write_text("not-a-token")
    refused = subprocess.run(
        [sys.executable, str(SMOKE_TEST)], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert "FAIL" in refused.stdout + refused.stderr
