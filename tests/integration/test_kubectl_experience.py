"""What a user sees with the pinned kubectl: explain, the printer columns, and scale.

Covers: `kubectl explain` prints model docstrings; `kubectl get tj` shows Phase, Nodes, World,
Epoch, Step, Restarts, Age; `kubectl scale` sets spec.replicas.desired and is refused outside
min..max.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from phalanx.models import GROUP, PLURAL, VERSION
from tests.integration.test_crd_admission import create, get_job, minimal
from tests.support.manifests import KUBECTL_GET_COLUMNS


def test_kubectl_explain_shows_field_descriptions(control_plane: ControlPlane) -> None:
    outputs: list[str] = []

    def explained() -> bool:
        result = control_plane.kubectl_run("explain", "trainingjob.spec.replicas", check=False)
        outputs.append(result.stdout + result.stderr)
        return result.returncode == 0

    # The API server publishes a new CRD's OpenAPI a few seconds after it is Established.
    wait_until(explained, timeout=60, what="the CRD's OpenAPI to be published", interval=0.5)
    text = " ".join(outputs[-1].split())
    assert "Node pod counts: the elastic range and the desired size." in text
    assert "Fewest node pods the job can train with." in text


def test_kubectl_get_shows_printer_columns(
    control_plane: ControlPlane, custom_objects: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom_objects, namespace, minimal("shown"))
    status: dict[str, Any] = {
        "phase": "Running",
        "nodes": 3,
        "worldSize": 6,
        "epoch": 2,
        "progress": {"step": 1234},
        "restarts": {"application": 1, "infrastructure": 1, "total": 2},
    }
    custom_objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "shown", {"status": status}
    )
    lines = control_plane.kubectl_run("get", "tj", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == KUBECTL_GET_COLUMNS
    assert lines[1].split()[:7] == ["shown", "Running", "3", "6", "2", "1234", "2"]


def test_kubectl_scale_sets_desired_nodes_within_min_max(
    control_plane: ControlPlane, custom_objects: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom_objects, namespace, minimal("scaled"))
    control_plane.kubectl_run("scale", "-n", namespace, "tj/scaled", "--replicas=3")
    job = get_job(custom_objects, namespace, "scaled")
    assert job["spec"]["replicas"]["desired"] == 3

    for outside in ("5", "1"):
        result = control_plane.kubectl_run(
            "scale", "-n", namespace, "tj/scaled", f"--replicas={outside}", check=False
        )
        assert result.returncode != 0
        assert "spec.replicas.desired" in result.stderr
    job = get_job(custom_objects, namespace, "scaled")
    assert job["spec"]["replicas"]["desired"] == 3
