"""The API service against the real API server, and identities with tokens from TokenRequest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from tests.integration.conftest import fresh_namespace
from tests.support.apiserver import running_api


@pytest.fixture(scope="module")
def api_url(kube_client: k8s.ApiClient) -> Iterator[str]:
    """The API service, acting with the admin client (its own identity)."""
    with running_api(kube_client, authz_cache_seconds=0.0) as url:
        yield url


@pytest.fixture
def other_namespace(kube_client: k8s.ApiClient) -> Iterator[str]:
    """A second namespace, where the test's user has no Role."""
    with fresh_namespace(kube_client) as name:
        yield name
