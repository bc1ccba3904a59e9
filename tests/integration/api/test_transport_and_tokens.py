"""What a stranger on the network, or a caller without rights, can learn from the service.

Covers, against the real API server: with a certificate the service speaks HTTPS, a client that
trusts the service's CA is answered, and one that trusts only the system's CAs, or another CA, is
refused at the handshake; a token issued for the kube API (its default audience) is refused with a
401 that names the service's audience, a token for the service's audience is accepted, and the
kube API refuses that one (a token handed to the service cannot act on the cluster); a caller
without rights gets the same 403 for an existing job and a missing one on every route that names
a job (a 404 would tell it which jobs exist); scale asks RBAC about the patch it does.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane
from harness.jobs import job_manifest
from harness.pki import Pki, make_pki
from harness.rbac import SERVICE_AUDIENCE, grant, identity
from tests.support.apiserver import running_api


@pytest.fixture(scope="module")
def service_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA and a certificate for 127.0.0.1 signed by it (the chart generates the same pair)."""
    return make_pki(tmp_path_factory.mktemp("service-pki"))


@pytest.fixture(scope="module")
def https_url(kube_client: k8s.ApiClient, service_pki: Pki) -> Iterator[str]:
    with running_api(
        kube_client,
        ca=service_pki.ca_cert,
        tls_cert_file=service_pki.serving_cert,
        tls_key_file=service_pki.serving_key,
        authz_cache_seconds=0.0,
    ) as url:
        yield url


def test_a_client_that_verifies_the_certificate_is_answered_over_https(
    https_url: str, service_pki: Pki, tmp_path: Path
) -> None:
    assert https_url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(service_pki.ca_cert))
    assert httpx.get(f"{https_url}/healthz", verify=trusted, timeout=10).status_code == 200
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_url}/healthz", timeout=10)  # the system's CAs only
    other = make_pki(tmp_path / "other")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_url}/healthz", verify=ssl.create_default_context(cafile=str(other.ca_cert)),
                  timeout=10)  # fmt: skip
    plain = https_url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):  # no plain-HTTP answer on the TLS port
        httpx.get(f"{plain}/api/v1/jobs", timeout=10).raise_for_status()


def test_only_a_token_for_the_services_audience_is_accepted(
    api_url: str, kube_client: k8s.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    robot = identity(kube_client, namespace, "audience-robot")
    grant(kube_client, namespace, robot, "reader", [
        k8s.V1PolicyRule(api_groups=["phalanx.dev"], resources=["trainingjobs"], verbs=["list"]),
    ])  # fmt: skip
    url, params = f"{api_url}/api/v1/jobs", {"namespace": namespace}
    ours = httpx.get(url, params=params, headers=robot.headers, timeout=10)
    assert ours.status_code == 200, ours.text
    cluster_token = httpx.get(url, params=params, headers=robot.kube_headers, timeout=10)
    assert cluster_token.status_code == 401
    assert f"for the audience '{SERVICE_AUDIENCE}'" in cluster_token.json()["detail"]
    # ... and the service's token is no key to the cluster itself.
    kube = ssl.create_default_context(cafile=str(control_plane.pki.ca_cert))
    replayed = httpx.get(
        f"{control_plane.server}/apis/phalanx.dev/v1alpha1/namespaces/{namespace}/trainingjobs",
        headers=robot.headers, verify=kube, timeout=10,
    )  # fmt: skip
    assert replayed.status_code == 401
    direct = httpx.get(
        f"{control_plane.server}/apis/phalanx.dev/v1alpha1/namespaces/{namespace}/trainingjobs",
        headers=robot.kube_headers, verify=kube, timeout=10,
    )  # fmt: skip
    assert direct.status_code == 200, "the same account's cluster token works on the cluster"


def stored_job(kube_client: k8s.ApiClient, namespace: str, name: str) -> None:
    """A TrainingJob created straight in the kube API (the service is under test)."""
    k8s.CustomObjectsApi(kube_client).create_namespaced_custom_object(
        "phalanx.dev", "v1alpha1", namespace, "trainingjobs", job_manifest(name)
    )


JOB_ROUTES = [
    ("GET", ""), ("GET", "/events"), ("GET", "/logs"), ("GET", "/checkpoints"),
    ("GET", "/history"), ("GET", "/progress"), ("PUT", "/scale"), ("POST", "/suspend"),
    ("POST", "/resume"), ("DELETE", ""),
]  # fmt: skip


def test_a_caller_without_rights_gets_403_for_existing_and_missing_jobs_alike(
    api_url: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    stored_job(kube_client, namespace, "real")
    stranger = identity(kube_client, namespace, "stranger")
    base = f"{api_url}/api/v1/namespaces/{namespace}/jobs"
    with httpx.Client(headers=stranger.headers, timeout=10) as api:
        for method, route in JOB_ROUTES:
            json = {"nodes": 2} if route == "/scale" else None
            answers = {name: api.request(method, f"{base}/{name}{route}", json=json)
                       for name in ("real", "ghost")}  # fmt: skip
            codes = {name: a.status_code for name, a in answers.items()}
            assert codes == {"real": 403, "ghost": 403}, (method, route, codes)
            real, ghost = (answers[n].json()["detail"] for n in ("real", "ghost"))
            assert real.replace('"real"', '"ghost"') == ghost, (method, route, real, ghost)


def test_scale_is_allowed_by_patch_on_the_scale_subresource(
    api_url: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    stored_job(kube_client, namespace, "sized")
    scaler = identity(kube_client, namespace, "scaler")
    grant(kube_client, namespace, scaler, "scaler", [
        k8s.V1PolicyRule(api_groups=["phalanx.dev"], resources=["trainingjobs"], verbs=["get"]),
        k8s.V1PolicyRule(api_groups=["phalanx.dev"], resources=["trainingjobs/scale"],
                         verbs=["update"]),
    ])  # fmt: skip
    url = f"{api_url}/api/v1/namespaces/{namespace}/jobs/sized/scale"
    refused = httpx.put(url, json={"nodes": 3}, headers=scaler.headers, timeout=10)
    assert refused.status_code == 403, "update is not the verb of the patch the service sends"
    assert 'cannot patch resource "trainingjobs/scale"' in refused.json()["detail"]
    grant(kube_client, namespace, scaler, "patcher", [
        k8s.V1PolicyRule(api_groups=["phalanx.dev"], resources=["trainingjobs/scale"],
                         verbs=["patch"]),
    ])  # fmt: skip
    allowed = httpx.put(url, json={"nodes": 3}, headers=scaler.headers, timeout=10)
    assert allowed.status_code == 200, allowed.text
