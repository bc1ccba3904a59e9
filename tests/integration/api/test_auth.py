"""Every action is the caller's, as Kubernetes RBAC sees it.

Covers, with tokens from the real API server (TokenRequest): a user with a Role in namespace A
lists, creates and scales jobs there; the same user gets 403 in namespace B, in the API server's
words; no token and a bad token get 401; a service-account token without rights is accepted
(authenticated) and refused (403); an invalid manifest gets 422 naming the field.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
from kubernetes import client as k8s

from harness.controlplane import wait_until
from harness.rbac import grant, grant_jobs, identity, manifest


def test_a_user_with_a_role_in_a_lists_creates_and_scales_there_and_is_403_in_b(
    api_url: str, kube_client: k8s.ApiClient, namespace: str, other_namespace: str
) -> None:
    alice = identity(kube_client, namespace, "alice")
    grant_jobs(kube_client, namespace, alice)
    with httpx.Client(base_url=f"{api_url}/api/v1", headers=alice.headers, timeout=10) as api:
        created = api.post(f"/namespaces/{namespace}/jobs", json=manifest("train"))
        assert created.status_code == 201, created.text
        assert created.json()["spec"]["replicas"] == {"min": 2, "max": 4}

        def listed() -> bool:
            page = api.get("/jobs", params={"namespace": namespace})
            assert page.status_code == 200, page.text
            return [j["name"] for j in page.json()["items"]] == ["train"]

        wait_until(listed, 10, "the new job in the list (from the watch cache)")
        scaled = api.put(f"/namespaces/{namespace}/jobs/train/scale", json={"nodes": 3})
        assert scaled.status_code == 200, scaled.text
        assert scaled.json()["spec"]["replicas"]["desired"] == 3
        too_big = api.put(f"/namespaces/{namespace}/jobs/train/scale", json={"nodes": 5})
        assert too_big.status_code == 422
        assert too_big.json()["detail"][0]["field"] == "spec.replicas.desired"

        denied = api.get("/jobs", params={"namespace": other_namespace})
        assert denied.status_code == 403
        assert (
            f'User "{alice.username}" cannot list resource "trainingjobs" in API group '
            f'"phalanx.dev" in the namespace "{other_namespace}"'
        ) in denied.json()["detail"]
        create_in_b = api.post(f"/namespaces/{other_namespace}/jobs", json=manifest("nope"))
        assert create_in_b.status_code == 403
        everywhere = api.get("/jobs")
        assert everywhere.status_code == 403, "a Role in one namespace does not list all of them"


def test_no_token_or_a_bad_one_is_401(api_url: str, namespace: str) -> None:
    missing = httpx.get(f"{api_url}/api/v1/jobs", params={"namespace": namespace})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    bad = httpx.get(
        f"{api_url}/api/v1/jobs", headers={"Authorization": "Bearer not-a-token"}, timeout=10
    )
    assert bad.status_code == 401
    assert "not accepted" in bad.json()["detail"]


def test_a_service_account_token_is_accepted_and_rbac_decides(
    api_url: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    robot = identity(kube_client, namespace, "ci-robot")
    url = f"{api_url}/api/v1/jobs"
    before = httpx.get(url, params={"namespace": namespace}, headers=robot.headers, timeout=10)
    assert before.status_code == 403, "authenticated, but no Role yet"
    grant_jobs(kube_client, namespace, robot)
    after = httpx.get(url, params={"namespace": namespace}, headers=robot.headers, timeout=10)
    assert after.status_code == 200, after.text


def test_an_invalid_manifest_is_422_naming_the_field(
    api_url: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    alice = identity(kube_client, namespace, "alice")
    grant_jobs(kube_client, namespace, alice)
    bad = manifest("bad", replicas={"min": 3, "max": 2})
    response = httpx.post(
        f"{api_url}/api/v1/namespaces/{namespace}/jobs", json=bad, headers=alice.headers, timeout=10
    )
    assert response.status_code == 422
    assert {
        "field": "spec.replicas.min",
        "message": "spec.replicas.min must be less than or equal to spec.replicas.max",
    } in response.json()["detail"]


def test_phalanx_openapi_prints_the_served_document(api_url: str) -> None:
    served = httpx.get(f"{api_url}/openapi.json", timeout=10).json()
    printed = subprocess.run(
        [sys.executable, "-m", "phalanx.cli", "openapi"], capture_output=True, text=True, check=True
    )
    assert json.loads(printed.stdout) == served
    operations = {op["operationId"] for path in served["paths"].values() for op in path.values()}
    assert {"listJobs", "getJob", "createJob", "deleteJob", "scaleJob", "suspendJob", "resumeJob",
            "listJobEvents", "getJobLogs", "getJobCheckpoints", "streamJobProgress"} <= operations  # fmt: skip


def test_a_role_limited_to_one_job_by_name_reads_that_job_only(
    api_url: str, kube_client: k8s.ApiClient, namespace: str
) -> None:
    """RBAC resourceNames hold: the namespace-wide review fails, the one for the name decides."""
    admin = identity(kube_client, namespace, "admin")
    grant_jobs(kube_client, namespace, admin)
    one = identity(kube_client, namespace, "one-job")
    only_mine = k8s.V1PolicyRule(
        api_groups=["phalanx.dev"], resources=["trainingjobs"], verbs=["get"],
        resource_names=["mine"],
    )  # fmt: skip
    grant(kube_client, namespace, one, "only-mine", [only_mine])
    jobs = f"{api_url}/api/v1/namespaces/{namespace}/jobs"
    for name in ("mine", "theirs"):
        created = httpx.post(jobs, json=manifest(name), headers=admin.headers, timeout=10)
        assert created.status_code == 201, created.text
    wait_until(
        lambda: httpx.get(f"{jobs}/theirs", headers=admin.headers).status_code == 200,
        10,
        "both jobs in the cache",
    )
    assert httpx.get(f"{jobs}/mine", headers=one.headers).status_code == 200
    theirs = httpx.get(f"{jobs}/theirs", headers=one.headers)
    assert theirs.status_code == 403
    assert 'cannot get resource "trainingjobs"' in theirs.json()["detail"]
