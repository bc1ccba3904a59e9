"""The API server, with the shipped CRD, admits what the models admit and refuses the rest.

Covers: every invalid fixture refused with its field named (and the same words as the models for
CEL rules); every example accepted; server defaults equal the models' defaults; immutable fields.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from harness.jobs import job_manifest
from phalanx.models import GROUP, PLURAL, VERSION, TrainingJob, field_errors
from tests.support.manifests import InvalidManifest, example_paths, invalid_manifests, load_yaml


def create(api: k8s.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    """Create a TrainingJob as `kubectl apply` does: unknown fields are errors (Strict)."""
    result = api.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body, field_validation="Strict"
    )
    return cast(dict[str, Any], result)


def get_job(api: k8s.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    """The TrainingJob as stored."""
    return cast(
        dict[str, Any], api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    )


def rejection(info: pytest.ExceptionInfo[ApiException]) -> str:
    """The API server's error message."""
    assert info.value.status in (400, 422), info.value
    message: str = json.loads(info.value.body or "{}")["message"]
    return message


def minimal(name: str) -> dict[str, Any]:
    return job_manifest(name, nprocPerNode=2, checkpoint={"dir": "/ckpt/a"})


@pytest.mark.parametrize("case", invalid_manifests(), ids=lambda c: c.name)
def test_api_server_refuses_invalid_manifest_naming_the_field(
    custom_objects: k8s.CustomObjectsApi, namespace: str, case: InvalidManifest
) -> None:
    with pytest.raises(ApiException) as info:
        create(custom_objects, namespace, case.manifest)
    message = rejection(info)
    assert case.expected_field in message
    with pytest.raises(ValidationError) as local:
        TrainingJob.from_manifest(case.manifest)
    for error in field_errors(local.value):
        if error.field == case.expected_field and error.source == "rule":
            assert error.message in message, "the models and the CRD word a rule differently"


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
def test_api_server_accepts_every_example(
    custom_objects: k8s.CustomObjectsApi, namespace: str, path: Any
) -> None:
    created = create(custom_objects, namespace, load_yaml(path))
    assert created["metadata"]["uid"]


def test_server_defaults_equal_model_defaults(
    custom_objects: k8s.CustomObjectsApi, namespace: str
) -> None:
    created = create(custom_objects, namespace, minimal("defaults"))
    assert created["spec"] == TrainingJob.from_manifest(minimal("defaults")).to_wire()["spec"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"nprocPerNode": 4}, "spec.nprocPerNode"),
        ({"parallelism": {"tensor": 2}}, "spec.parallelism"),
        ({"checkpoint": {"dir": "/ckpt/b"}}, "spec.checkpoint"),
        ({"checkpoint": {"dir": None, "url": "s3://bucket/a"}}, "spec.checkpoint"),
    ],
    ids=["nprocPerNode", "parallelism", "checkpoint-dir", "checkpoint-dir-to-url"],
)
def test_immutable_field_cannot_change(
    custom_objects: k8s.CustomObjectsApi, namespace: str, change: dict[str, Any], field: str
) -> None:
    create(custom_objects, namespace, minimal("immutable"))
    with pytest.raises(ApiException) as info:
        custom_objects.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "immutable", {"spec": change}
        )
    message = rejection(info)
    assert field in message
    assert "immutable" in message


def test_mutable_fields_can_change(custom_objects: k8s.CustomObjectsApi, namespace: str) -> None:
    create(custom_objects, namespace, minimal("mutable"))
    custom_objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "mutable",
        {"spec": {"replicas": {"max": 6}, "suspend": True, "checkpoint": {"keep": 5}}},
    )  # fmt: skip
    patched = get_job(custom_objects, namespace, "mutable")
    assert patched["spec"]["replicas"]["max"] == 6
    assert patched["spec"]["checkpoint"]["keep"] == 5
