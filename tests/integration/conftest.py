"""Fixtures for tests against a real API server: the control plane for the session, a client, and
a namespace per test. Every test in this folder is marked `integration`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from harness.controlplane import REPO_ROOT, ControlPlane, running_control_plane

_HERE = Path(__file__).parent
PODGROUP_CRD = REPO_ROOT / "tests/fixtures/crds/scheduling.x-k8s.io_podgroups.yaml"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback with the shipped CRD installed, for the whole session."""
    with running_control_plane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube_client(control_plane: ControlPlane) -> Iterator[k8s.ApiClient]:
    """An ApiClient with admin rights on the test control plane."""
    config_file = str(control_plane.kubeconfig)
    api: k8s.ApiClient = k8s_config.new_client_from_config(config_file=config_file)
    yield api
    api.close()


@contextmanager
def fresh_namespace(kube_client: k8s.ApiClient) -> Iterator[str]:
    """A namespace with a random name, deleted afterwards."""
    core = k8s.CoreV1Api(kube_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)


@pytest.fixture
def namespace(kube_client: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    with fresh_namespace(kube_client) as name:
        yield name


@pytest.fixture
def custom_objects(kube_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    """The API for TrainingJobs."""
    return k8s.CustomObjectsApi(kube_client)


@pytest.fixture
def podgroup_crd(control_plane: ControlPlane) -> Iterator[None]:
    """scheduler-plugins' PodGroup CRD, for gang scheduling, installed for one test."""
    control_plane.kubectl_run("apply", "-f", str(PODGROUP_CRD))
    control_plane.wait_established(PODGROUP_CRD)
    yield
    # Wait for the deletion: a CRD still Terminating when the next test applies it swallows that
    # apply, then vanishes, and the next test's wait for Established can never succeed.
    control_plane.kubectl_run("delete", "-f", str(PODGROUP_CRD), "--wait=true", "--timeout=60s")
