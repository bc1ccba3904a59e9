"""The executor's creates and applies sent as plain JSON (`phalanx.operator.cluster.writes`), against
the real API server: what it stores, and its refusals raised as the generated client raises
them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.operator.cluster import writes
from phalanx.operator.cluster.answers import api_message


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "E", "value": "1"}]}]},
    }  # fmt: skip


def test_a_pod_is_stored_as_sent_and_made_twice_is_a_conflict(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    writes.create(kube_client, namespace, _pod("p"))
    answer: Any = k8s.CoreV1Api(kube_client).read_namespaced_pod(
        "p", namespace, _preload_content=False
    )
    stored = json.loads(answer.data)
    assert stored["metadata"]["labels"] == {"a": "b"}
    assert stored["spec"]["containers"][0]["env"] == [{"name": "E", "value": "1"}]
    with pytest.raises(ApiException) as conflict:
        writes.create(kube_client, namespace, _pod("p"))
    assert conflict.value.status == 409


def test_the_other_kinds_go_to_their_collections(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"}, "rules": []}  # fmt: skip
    for manifest in (lease, role):
        writes.create(kube_client, namespace, manifest)
    assert k8s.CoordinationV1Api(kube_client).read_namespaced_lease("l", namespace).metadata
    assert k8s.RbacAuthorizationV1Api(kube_client).read_namespaced_role("r", namespace).metadata


def test_an_invalid_object_is_refused_with_the_api_servers_words(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    pod = _pod("bad")
    pod["spec"] = {"containers": []}
    with pytest.raises(ApiException) as refused:
        writes.create(kube_client, namespace, pod)
    assert refused.value.status == 422
    assert "spec.containers" in api_message(refused.value)


def test_an_apply_makes_the_object_or_makes_it_so(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    """One request whether it exists or not; a field another manager set is taken over (an
    edit by hand is not the spec), and a refusal raises as a create's does."""
    core = k8s.CoreV1Api(kube_client)

    def config(data: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}

    writes.apply(kube_client, namespace, config({"A": "1", "B": "1"}), "phalanx-test")
    assert core.read_namespaced_config_map("c", namespace).data == {"A": "1", "B": "1"}
    core.patch_namespaced_config_map("c", namespace, {"data": {"A": "by hand"}})
    writes.apply(kube_client, namespace, config({"A": "2"}), "phalanx-test")
    stored = core.read_namespaced_config_map("c", namespace)
    assert stored.data == {"A": "2"}, "B, no longer applied, is gone; A is the applier's again"
    managers = {(m.manager, m.operation) for m in stored.metadata.managed_fields}
    assert ("phalanx-test", "Apply") in managers
    with pytest.raises(ApiException) as refused:
        writes.apply(kube_client, namespace, config({"not a key": "x"}), "phalanx-test")
    assert refused.value.status == 422
    assert "data[not a key]" in api_message(refused.value)


def test_a_kind_it_does_not_create_names_itself() -> None:
    with pytest.raises(ValueError, match="Secret is not a kind the executor creates"):
        writes.collection_path({"apiVersion": "v1", "kind": "Secret"}, "ns")
