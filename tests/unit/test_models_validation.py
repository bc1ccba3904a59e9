"""The models refuse what the API server refuses, naming the same field: the local backend's
validation (no server) and the CRD's (generated from the same rules) must agree.

Covers: every invalid fixture is refused with its field named; every shipped example is accepted;
defaults; strict types; field errors in the API server's dotted form.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from harness.jobs import job_manifest
from phalanx.models import TrainingJob, field_errors
from tests.support.manifests import example_paths, invalid_manifests, load_yaml

INVALID = invalid_manifests()


def _minimal() -> dict[str, Any]:
    return job_manifest("m", replicas={"min": 1, "max": 2})


def _mistake(case: Any) -> str:
    """The field and the part of the manifest that holds the mistake."""
    part = "metadata" if case.expected_field.startswith("metadata.") else "spec"
    return f"{case.expected_field}: {case.manifest[part]}"


def test_there_are_at_least_30_distinct_mistakes() -> None:
    assert len(INVALID) >= 30
    assert len({_mistake(m) for m in INVALID}) == len(INVALID)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_manifest_is_refused_naming_its_field(case: Any) -> None:
    with pytest.raises(ValidationError) as info:
        TrainingJob.from_manifest(case.manifest)
    fields = [e.field for e in field_errors(info.value)]
    assert case.expected_field in fields, f"errors name {fields}, not {case.expected_field}"


@pytest.mark.parametrize("path", example_paths(), ids=lambda p: p.name)
def test_shipped_example_is_accepted(path: Any) -> None:
    job = TrainingJob.from_manifest(load_yaml(path))
    assert job.spec.replicas.min <= job.spec.desired_nodes <= job.spec.replicas.max


def test_defaults_fill_nested_objects() -> None:
    job = TrainingJob.from_manifest(_minimal())
    assert job.spec.nproc_per_node == 1
    assert (job.spec.parallelism.tensor, job.spec.parallelism.pipeline) == (1, 1)
    assert job.spec.failure_policy.backoff.initial_seconds == 10
    assert job.spec.checkpoint.async_save is True
    assert job.spec.desired_nodes == 2


def test_wire_form_is_camel_case_and_round_trips() -> None:
    job = TrainingJob.from_manifest(_minimal())
    wire = job.to_wire()
    assert wire["spec"]["nprocPerNode"] == 1
    assert wire["spec"]["checkpoint"]["async"] is True
    assert TrainingJob.from_manifest(wire) == job


def test_types_are_strict_like_the_api_server() -> None:
    manifest = _minimal()
    manifest["spec"]["nprocPerNode"] = "2"
    with pytest.raises(ValidationError) as info:
        TrainingJob.from_manifest(manifest)
    assert [e.field for e in field_errors(info.value)] == ["spec.nprocPerNode"]


def test_reserved_env_in_valid_names_is_allowed() -> None:
    manifest = _minimal()
    manifest["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RANKING_MODE", "value": "x"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
    ]
    TrainingJob.from_manifest(manifest)


def test_unknown_field_message_names_the_path() -> None:
    manifest = _minimal()
    manifest["spec"]["replica"] = 3
    with pytest.raises(ValidationError) as info:
        TrainingJob.from_manifest(manifest)
    assert [str(e) for e in field_errors(info.value)] == [
        'spec.replica: unknown field "spec.replica"'
    ]
