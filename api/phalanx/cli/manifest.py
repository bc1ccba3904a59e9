"""Read a TrainingJob manifest and refuse it the way the API server would.

Why the same words: a manifest that `phalanx run` refuses must be refused by `kubectl apply` for
the same reason, and the other way round. The models carry the CRD's CEL rules with the same
messages, and errors are named by the field's dotted path (`spec.replicas.min`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from phalanx.models import API_VERSION, KIND, TrainingJob, field_errors


class ManifestError(Exception):
    """The manifest cannot be used; `lines` say why, one field per line."""

    def __init__(self, headline: str, lines: list[str] | None = None) -> None:
        super().__init__(headline)
        self.headline = headline
        self.lines = lines or []

    def __str__(self) -> str:
        return "\n".join([self.headline, *(f"* {line}" for line in self.lines)])


def _documents(path: Path) -> list[Any]:
    try:
        text = path.read_text()
    except OSError as error:
        raise ManifestError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise ManifestError(f"{path} is not valid YAML: {error}") from error


def load_job(path: Path) -> TrainingJob:
    """The one TrainingJob in `path`, validated; ManifestError names each refused field."""
    documents = _documents(path)
    if len(documents) != 1:
        raise ManifestError(
            f"{path} holds {len(documents)} documents; give one file per TrainingJob"
        )
    manifest = documents[0]
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} is not a Kubernetes object (a YAML mapping)")
    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    wrong = []
    if api_version != API_VERSION:
        wrong.append(f"apiVersion: expected {API_VERSION!r}, got {api_version!r}")
    if kind != KIND:
        wrong.append(f"kind: expected {KIND!r}, got {kind!r}")
    if wrong:
        raise ManifestError(f"{path} is not a TrainingJob:", wrong)
    name = (manifest.get("metadata") or {}).get("name")
    try:
        job = TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        raise ManifestError(
            f'The TrainingJob "{name}" is invalid:', [str(e) for e in field_errors(error)]
        ) from error
    if not job.metadata.name:
        raise ManifestError(
            "The TrainingJob is invalid:", ["metadata.name: Required value: name is required"]
        )
    return job
