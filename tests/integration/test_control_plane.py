"""The control plane fixture itself: real versions, RBAC, service-account tokens, clean teardown.

Covers: the binaries report v1.33.13; RBAC denies an unprivileged service account; TokenRequest
issues tokens; stopping a control plane leaves no process behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from harness.controlplane import ControlPlane, running_control_plane, wait_until


def test_binaries_report_their_real_version(control_plane: ControlPlane) -> None:
    version = control_plane.kubectl_run("version", "-o", "json").stdout
    assert '"gitVersion": "v1.33.13"' in version.replace('":"', '": "')


def test_service_account_tokens_are_issued_and_rbac_decides(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    account = k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="nobody"))
    core.create_namespaced_service_account(namespace, account)
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    issued = core.create_namespaced_service_account_token("nobody", namespace, request).status
    assert issued is not None
    token = issued.token

    config = k8s.Configuration()
    config.host = control_plane.server
    config.ssl_ca_cert = str(control_plane.pki.ca_cert)
    config.api_key = {"authorization": f"Bearer {token}"}
    with k8s.ApiClient(config) as as_nobody:
        review = k8s.AuthenticationV1Api(as_nobody).create_self_subject_review(
            k8s.V1SelfSubjectReview()
        )
        assert review.status is not None
        assert review.status.user_info is not None
        assert review.status.user_info.username == f"system:serviceaccount:{namespace}:nobody"
        with pytest.raises(ApiException) as info:
            k8s.CoreV1Api(as_nobody).list_namespaced_pod(namespace)
        assert info.value.status == 403


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@pytest.mark.slow
def test_teardown_leaves_no_process_behind(tmp_path: Path) -> None:
    with running_control_plane(tmp_path) as plane:
        pids = plane.pids
        assert len(pids) == 3
        assert all(_alive(pid) for pid in pids)
    wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=5, what="processes to end")
