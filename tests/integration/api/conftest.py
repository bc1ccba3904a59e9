"""The API service against the real API server, and identities with tokens from TokenRequest."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from tests.support.apiserver import running_api


@pytest.fixture(scope="module")
def api_url(kube_client: k8s.ApiClient) -> Iterator[str]:
    """The API service, acting with the admin client (its own identity)."""
    with running_api(kube_client, authz_cache_seconds=0.0) as url:
        yield url


@pytest.fixture
def other_namespace(kube_client: k8s.ApiClient) -> Iterator[str]:
    core = k8s.CoreV1Api(kube_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)
