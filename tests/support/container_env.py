"""A container's variables as the kubelet resolves them, for tests that read a node pod: its
envFrom ConfigMaps in their order (a later one wins a name they share), then its `env` (which
wins over every envFrom source). The job's common variables come from its env ConfigMap; a
test that read only `env` would miss them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phalanx.models.job import TrainingJob
from phalanx.operator.builder import BuildSettings, env_config_map

Manifest = Mapping[str, Any]


def resolved(
    pod: Manifest, config_maps: Mapping[str, Mapping[str, str]], container: int = 0
) -> dict[str, str]:
    """The variables of the pod's `container`, with `config_maps` (name to data) the ConfigMaps
    it names; the downward API's pod name resolved as the pod's own. `pod` as JSON (a stored pod
    read with the client: `ApiClient.sanitize_for_serialization`)."""
    spec = pod["spec"]["containers"][container]
    values: dict[str, str] = {}
    for source in spec.get("envFrom") or []:
        reference = source.get("configMapRef")
        assert reference is not None, f"an envFrom source this helper does not read: {source}"
        prefix = source.get("prefix") or ""
        values |= {prefix + k: v for k, v in config_maps[reference["name"]].items()}
    for entry in spec.get("env") or []:
        if entry.get("value") is not None:
            values[entry["name"]] = str(entry["value"])
            continue
        field = (entry.get("valueFrom") or {}).get("fieldRef") or {}
        assert field.get("fieldPath") == "metadata.name", (
            f"an entry this helper cannot resolve: {entry}"
        )
        values[entry["name"]] = pod["metadata"]["name"]
    return values


def built(job: TrainingJob, pod: Manifest, settings: BuildSettings | None = None) -> dict[str, str]:
    """The variables of a pod the builder made for `job`, with the job's env ConfigMap as the
    builder makes it."""
    config = env_config_map(job, settings or BuildSettings())
    return resolved(pod, {config["metadata"]["name"]: config["data"]})
