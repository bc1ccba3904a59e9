"""The tests' one TrainingJob factory: a small valid job that each test changes only where it
matters to it, as a manifest (`job_manifest`, what a user applies) or as the model
(`job_model`, what the operator's parts take)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from phalanx.models.job import API_VERSION, TrainingJob

DEFAULT_SPEC: dict[str, Any] = {
    "replicas": {"min": 2, "max": 4},
    "checkpoint": {"dir": "/ckpt"},
    "template": {"spec": {"containers": [{"name": "trainer", "image": "img"}]}},
}
"""Two to four node pods of one container, checkpoints in a folder: what every spec needs."""


def job_manifest(
    name: str | None = "j",
    *,
    namespace: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    container: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """The job `name` as a user writes it: DEFAULT_SPEC, each of `spec`'s fields (by their API
    names) replacing the default's, a mapping merged into a default mapping one level deep
    (`replicas={"max": 8}` keeps min 2, and a None there drops the default's field:
    `checkpoint={"dir": None, "url": ...}`); `container`: fields of the one container (a
    `template` given whole replaces it); `metadata` beside the name (None: none, as with a
    generateName) and namespace."""
    merged = copy.deepcopy(DEFAULT_SPEC)
    for key, value in spec.items():
        default = merged.get(key)
        if isinstance(value, Mapping) and isinstance(default, dict):
            both = {**default, **value}
            merged[key] = {k: v for k, v in both.items() if v is not None}
        else:
            merged[key] = value
    if container is not None:
        [first, *others] = merged["template"]["spec"]["containers"]
        merged["template"]["spec"]["containers"] = [{**first, **container}, *others]
    meta: dict[str, Any] = {"name": name} if name is not None else {}
    meta |= metadata or {}
    if namespace is not None:
        meta["namespace"] = namespace
    manifest: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "TrainingJob"}
    manifest |= {"metadata": meta, "spec": merged}
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


def job_model(name: str = "j", *, namespace: str = "ns", **changes: Any) -> TrainingJob:
    """`job_manifest`'s job, validated as the operator reads it (in namespace `namespace`)."""
    return TrainingJob.model_validate(job_manifest(name, namespace=namespace, **changes))


def operator_job(name: str, **spec: Any) -> dict[str, Any]:
    """A TrainingJob manifest (`job_manifest`) with nprocPerNode 2 and a short backoff (the
    operator's restarts come within the tests' waits) unless overridden."""
    backoff = {"initialSeconds": 1, "maxSeconds": 2}
    spec = {"nprocPerNode": 2, "failurePolicy": {"backoff": backoff}, **spec}
    return job_manifest(name, container={"image": "phalanx/trainer:test"}, **spec)
