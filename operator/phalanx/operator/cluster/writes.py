"""Creates sent as the JSON they are, past the generated client's validation.

Why: `kubernetes` 35+ wraps every API method in pydantic's `validate_call`, which turns a
manifest given as a dict into the client's model objects (a `V1Pod`, every container and env
entry), and its serializer turns them back into a dict before sending. For a pod that round
trip cost more than the request itself (docs/figures.md, "CPU"), and the executor creates every
pod, its report Leases and a job's other children. The manifests are the builder's plain dicts;
the API server validates them anyway, and refuses what it would not store (422) as before.

Every create asks for strict field validation (`fieldValidation=Strict`, as `kubectl apply`
does by default): the pod template is the user's own (the CRD keeps its unknown fields), and
without it a misspelt field (`resourcs:`) is dropped by the API server in silence, so the pod
would run without it (a GPU limit lost). Strict, the create is refused (400) with the field's
path, and the job's ConfigurationError condition says so (`answers.refuses_for_good`).

The request goes through the same `ApiClient` (its credentials, its connection pool, and the
timing of `kube.TimedApiClient`); an answer outside 2xx raises `ApiException` as the generated
methods do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

__all__ = ["FIELD_MANAGER", "apply", "collection_path", "create"]

FIELD_MANAGER = "phalanx-operator"
"""The field manager of what the operator applies."""

_PLURALS: dict[str, str] = {
    "Pod": "pods",
    "ConfigMap": "configmaps",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Event": "events",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Lease": "leases",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "PodGroup": "podgroups",
}
"""The kinds the executor writes this way, and their resource names."""

STRICT = ("fieldValidation", "Strict")
"""Refuse an object with an unknown or duplicated field instead of dropping the field."""

_JSON = {"Content-Type": "application/json", "Accept": "application/json"}


def collection_path(manifest: Mapping[str, Any], namespace: str) -> str:
    """The URL path of the collection `manifest`'s object is created in: /api/v1 for the core
    group, /apis/<group>/<version> for the others."""
    kind, version = manifest["kind"], manifest["apiVersion"]
    try:
        plural = _PLURALS[kind]
    except KeyError:
        raise ValueError(f"{kind} is not a kind the executor creates") from None
    root = "/api" if "/" not in version else "/apis"
    return f"{root}/{version}/namespaces/{{namespace}}/{plural}"


def create(api: k8s.ApiClient, namespace: str, manifest: Mapping[str, Any]) -> None:
    """POST `manifest` in `namespace`; its answer read and released. Raises ApiException for
    an answer outside 2xx (409 when it exists, 422 when it is invalid, 400 when a field is
    unknown: strict field validation)."""
    path = collection_path(manifest, namespace)
    _send(api, "POST", path, namespace, dict(_JSON), manifest, [STRICT])


def apply(api: k8s.ApiClient, namespace: str, manifest: Mapping[str, Any], manager: str) -> None:
    """Server-side apply `manifest` in `namespace` as field manager `manager`, taking over
    fields another manager set (force): made if absent, made so if not. One request either
    way, where a create would need a read and a replace after its 409."""
    path = f"{collection_path(manifest, namespace)}/{{name}}"
    headers = {**_JSON, "Content-Type": "application/apply-patch+yaml"}  # JSON is YAML
    query = [("fieldManager", manager), ("force", "true")]
    _send(api, "PATCH", path, namespace, headers, manifest, query, manifest["metadata"]["name"])


def _send(
    api: k8s.ApiClient, method: str, path: str, namespace: str, headers: dict[str, str],
    body: Mapping[str, Any], query: list[tuple[str, str]], name: str | None = None,
) -> None:  # fmt: skip
    params = {"namespace": namespace} | ({"name": name} if name is not None else {})
    method, url, headers, _, _ = api.param_serialize(
        method, path, path_params=params, query_params=query, header_params=headers,
        auth_settings=["BearerToken"],
    )  # fmt: skip
    answer: Any = api.call_api(method, url, headers, body=body)
    try:
        answer.read()
    finally:
        answer.response.release_conn()
    if not 200 <= answer.status <= 299:
        raise ApiException.from_response(http_resp=answer, body=None, data=None)
