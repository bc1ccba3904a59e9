"""`kube.ServedGroup` against the real API server: a CRD installed after the operator started is
found at the next look (Kueue installed after Phalanx needs no operator restart)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane
from phalanx.operator.cluster.kube import ServedGroup
from tests.integration.conftest import PODGROUP_CRD


@pytest.fixture
def no_podgroups(control_plane: ControlPlane) -> Iterator[None]:
    control_plane.kubectl_run("delete", "-f", str(PODGROUP_CRD), "--ignore-not-found", "--wait")
    yield
    control_plane.kubectl_run("delete", "-f", str(PODGROUP_CRD), "--ignore-not-found", "--wait")


def test_a_group_installed_later_is_found_at_the_next_look(
    kube_client: k8s.ApiClient, control_plane: ControlPlane, no_podgroups: None
) -> None:
    group = ServedGroup(kube_client, "scheduling.x-k8s.io", "v1alpha1", recheck_seconds=3600)
    assert group.refresh() is False
    control_plane.kubectl_run("apply", "-f", str(PODGROUP_CRD))
    control_plane.wait_established(PODGROUP_CRD)
    assert group.refresh() is False, "not asked again before recheck_seconds"
    assert group.refresh(now=True) is True, "asked at once for a job about to start"
    late = ServedGroup(kube_client, "scheduling.x-k8s.io", "v1alpha1", recheck_seconds=0)
    assert late.refresh() is True
    assert ServedGroup(kube_client, "scheduling.x-k8s.io", "v9").refresh() is False, (
        "a version it does not serve"
    )
