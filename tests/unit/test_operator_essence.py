"""The slim diff base gives kopf the same essence as its own storage, from a job with a large
status and managedFields (what the slimming leaves out must not change what kopf compares)."""

from __future__ import annotations

import copy
from typing import cast

import kopf

from harness.jobs import job_manifest
from phalanx.operator.essence import AnnotationProgressStorage, SpecDiffBaseStorage


def _job() -> kopf.RawBody:
    """A stored job with everything kopf's essence leaves out: server fields, kopf's and
    kubectl's annotations, a finalizer, many managed fields and a large status."""
    metadata = {
        "uid": "u",
        "resourceVersion": "7",
        "generation": 2,
        "labels": {"team": "a"},
        "annotations": {
            "note": "kept",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "kopf.zalando.org/last-handled-configuration": '{"spec": {}}',
        },
        "finalizers": ["phalanx.dev/finalizer"],
        "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}] * 50,
    }
    status = {"phase": "Running", "current": {"ranks": {f"p{i}": i for i in range(500)}}}
    return cast(kopf.RawBody, job_manifest(namespace="ns", metadata=metadata, status=status))


def test_the_essence_is_kopfs_own() -> None:
    raw = _job()
    stock = kopf.AnnotationsDiffBaseStorage().build(body=kopf.Body(copy.deepcopy(raw)))
    slim = SpecDiffBaseStorage().build(body=kopf.Body(raw))
    assert slim == stock
    assert "status" not in slim
    assert slim["metadata"] == {"labels": {"team": "a"}, "annotations": {"note": "kept"}}


def test_the_body_is_left_as_it_was_and_its_spec_is_not_copied() -> None:
    raw = _job()
    before = copy.deepcopy(raw)
    slim = SpecDiffBaseStorage().build(body=kopf.Body(raw))
    assert raw == before  # the annotations kopf leaves out were dropped from a copy
    assert slim["spec"] is raw["spec"]
    assert slim["metadata"]["annotations"] is not raw["metadata"]["annotations"]


def test_a_spec_change_is_still_seen() -> None:
    before, after = _job(), _job()
    after["spec"]["replicas"]["max"] = 8
    storage = SpecDiffBaseStorage()
    old = storage.build(body=kopf.Body(before))
    new = storage.build(body=kopf.Body(after))
    assert old != new
    assert (old["spec"]["replicas"]["max"], new["spec"]["replicas"]["max"]) == (4, 8)


def test_extra_fields_take_kopfs_full_copy() -> None:
    raw = _job()
    essence = SpecDiffBaseStorage().build(body=kopf.Body(raw), extra_fields=["status.phase"])
    assert essence["status"] == {"phase": "Running"}


def test_clearing_progress_is_kopfs_and_leaves_the_essence_as_it_was() -> None:
    raw = _job()
    raw["metadata"]["annotations"]["kopf.zalando.org/reconcile"] = '{"retries": 1}'
    essence = kopf.AnnotationsDiffBaseStorage(prefix="other.example").build(body=kopf.Body(raw))
    before = copy.deepcopy(essence)
    stock = kopf.AnnotationsProgressStorage().clear(essence=copy.deepcopy(essence))
    cleared = AnnotationProgressStorage().clear(essence=essence)
    assert cleared == stock
    assert "kopf.zalando.org/reconcile" not in cleared["metadata"]["annotations"]
    assert essence == before
