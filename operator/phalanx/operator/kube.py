"""The one module that makes Kubernetes clients: the `kubernetes` ApiClient the executor uses
and the matching kopf login, both from the same credentials."""

from __future__ import annotations

import kopf
from kubernetes import client as k8s

from phalanx.kubeconfig import load_configuration

__all__ = ["api_client", "connection_info", "has_api_group", "load_configuration"]


def api_client(configuration: k8s.Configuration) -> k8s.ApiClient:
    """A client for the executor (used from worker threads)."""
    return k8s.ApiClient(configuration)


def connection_info(configuration: k8s.Configuration) -> kopf.ConnectionInfo:
    """The same credentials in kopf's form, for its watches."""
    bearer = (configuration.api_key or {}).get("authorization", "")
    token = bearer.removeprefix("Bearer ").strip() or None
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        scheme="Bearer" if token else None,
        token=token,
    )


def has_api_group(client: k8s.ApiClient, group: str) -> bool:
    """Whether the API server serves `group` (e.g. scheduling.x-k8s.io for PodGroups)."""
    groups = k8s.ApisApi(client).get_api_versions().groups or []
    return any(g.name == group for g in groups)
