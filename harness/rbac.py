"""Identities for API tests: service accounts with tokens from the real API server
(TokenRequest), and a Role on TrainingJobs to bind them to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from harness.jobs import job_manifest

TRAININGJOB_RULES = [
    k8s.V1PolicyRule(
        api_groups=["phalanx.dev"],
        resources=["trainingjobs"],
        verbs=["get", "list", "watch", "create", "delete", "patch", "update"],
    ),
    k8s.V1PolicyRule(
        api_groups=["phalanx.dev"],
        resources=["trainingjobs/scale"],
        verbs=["get", "update", "patch"],
    ),
]


SERVICE_AUDIENCE = "phalanx-api"
"""The audience the API service asks TokenReview for (its `token_audiences` default)."""


@dataclass
class Identity:
    """A service account and two tokens the real API server issued for it: one for the API
    service (its audience), one for the kube API (the API server's own audience)."""

    namespace: str
    name: str
    token: str
    """For the API service: refused by the kube API."""
    kube_token: str
    """For the kube API (kubeconfig mode): refused by the API service."""

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def headers(self) -> dict[str, str]:
        """For the API service."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def kube_headers(self) -> dict[str, str]:
        """For the kube API."""
        return {"Authorization": f"Bearer {self.kube_token}"}


def identity(kube_client: k8s.ApiClient, namespace: str, name: str) -> Identity:
    """A service account `name` in `namespace` with fresh tokens (TokenRequest)."""
    core = k8s.CoreV1Api(kube_client)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=name))
    )
    return Identity(
        namespace,
        name,
        token_for(kube_client, namespace, name, [SERVICE_AUDIENCE]),
        token_for(kube_client, namespace, name, []),
    )


def token_for(kube_client: k8s.ApiClient, namespace: str, name: str, audiences: list[str]) -> str:
    """A TokenRequest token of service account `name` (audiences [] = the API server's own)."""
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=audiences, expiration_seconds=3600)
    )
    core = k8s.CoreV1Api(kube_client)
    return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


def grant_jobs(kube_client: k8s.ApiClient, namespace: str, who: Identity) -> None:
    """A Role on TrainingJobs in `namespace`, bound to `who`."""
    grant(kube_client, namespace, who, "jobs", TRAININGJOB_RULES)


def grant(
    kube_client: k8s.ApiClient,
    namespace: str,
    who: Identity,
    role: str,
    rules: list[k8s.V1PolicyRule],
) -> None:
    """A Role `role` with `rules` in `namespace` (kept if it exists), bound to `who`."""
    rbac = k8s.RbacAuthorizationV1Api(kube_client)
    try:
        rbac.create_namespaced_role(
            namespace, k8s.V1Role(metadata=k8s.V1ObjectMeta(name=role), rules=rules)
        )
    except ApiException as error:
        if error.status != 409:
            raise
    subject = k8s.RbacV1Subject(kind="ServiceAccount", name=who.name, namespace=who.namespace)
    rbac.create_namespaced_role_binding(
        namespace,
        k8s.V1RoleBinding(
            metadata=k8s.V1ObjectMeta(name=f"{role}-{who.name}"),
            role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=role),
            subjects=[subject],
        ),
    )


def manifest(name: str, **spec: Any) -> dict[str, Any]:
    """A small valid TrainingJob body (`job_manifest`) without apiVersion and kind, which the
    API service adds."""
    body = job_manifest(name, **spec)
    return {"metadata": body["metadata"], "spec": body["spec"]}
