"""Kubernetes credentials for Phalanx's services: a kubeconfig file, the in-cluster service
account, or $KUBECONFIG, in that order. The operator and the API service both start here."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException


def load_configuration(kubeconfig: Path | None) -> k8s.Configuration:
    """Credentials from `kubeconfig`, else the in-cluster service account, else $KUBECONFIG."""
    configuration = k8s.Configuration()
    if kubeconfig is not None:
        k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        return configuration
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException:
        k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return configuration
