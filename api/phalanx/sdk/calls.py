"""Each SDK method as data: the HTTP request it makes and how its answer is read.

Why: the sync and async clients differ only in how they send; building requests and reading
answers lives here once, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
import yaml

from phalanx.models import TrainingJob
from phalanx.models.responses import EventList, JobDetail, JobList
from phalanx.models.status import ENDED, Phase
from phalanx.sdk.errors import JobEndedError

T = TypeVar("T")
Manifest = TrainingJob | Mapping[str, Any] | str | Path
Condition = Phase | str | Callable[[JobDetail], bool]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


def _detail(response: httpx.Response) -> JobDetail:
    return JobDetail.model_validate(response.json())


def _nothing(_: httpx.Response) -> None:
    return None


def manifest_dict(manifest: Manifest) -> dict[str, Any]:
    """A manifest from a model, a mapping, or a YAML file path."""
    if isinstance(manifest, TrainingJob):
        return manifest.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(manifest, str | Path):
        loaded = yaml.safe_load(Path(manifest).read_text())
        if not isinstance(loaded, dict):
            raise ValueError(f"{manifest} does not hold a TrainingJob manifest")
        return loaded
    return dict(manifest)


def _job(namespace: str, name: str, suffix: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/jobs/{name}{suffix}"


def create(namespace: str, manifest: Manifest) -> Call[JobDetail]:
    body = manifest_dict(manifest)
    target = (body.get("metadata") or {}).get("namespace") or namespace
    return Call("POST", f"/api/v1/namespaces/{target}/jobs", _detail, json=body)


def get(namespace: str, name: str) -> Call[JobDetail]:
    return Call("GET", _job(namespace, name), _detail)


def list_jobs(
    namespace: str | None, phase: str | None, label_selector: str | None, limit: int,
    continue_: str | None,
) -> Call[JobList]:  # fmt: skip
    params = {"namespace": namespace, "phase": phase, "labelSelector": label_selector,
              "limit": limit, "continue": continue_}  # fmt: skip
    return Call(
        "GET",
        "/api/v1/jobs",
        lambda r: JobList.model_validate(r.json()),
        params={k: v for k, v in params.items() if v is not None},
    )


def scale(namespace: str, name: str, nodes: int) -> Call[JobDetail]:
    return Call("PUT", _job(namespace, name, "/scale"), _detail, json={"nodes": nodes})


def suspend(namespace: str, name: str) -> Call[JobDetail]:
    return Call("POST", _job(namespace, name, "/suspend"), _detail)


def resume(namespace: str, name: str) -> Call[JobDetail]:
    return Call("POST", _job(namespace, name, "/resume"), _detail)


def delete(namespace: str, name: str) -> Call[None]:
    return Call("DELETE", _job(namespace, name), _nothing)


def events(namespace: str, name: str) -> Call[EventList]:
    return Call("GET", _job(namespace, name, "/events"),
                lambda r: EventList.model_validate(r.json()))  # fmt: skip


def logs_params(node: int, follow: bool, tail_lines: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {"node": node, "follow": str(follow).lower()}
    if tail_lines is not None:
        params["tailLines"] = tail_lines
    return params


def reached(job: JobDetail, condition: Condition) -> bool:
    """Whether `job` meets `condition`: a phase, a True condition type, or a predicate.

    Raises JobEndedError when the job ended in another phase, so a wait never outlasts it."""
    if callable(condition):
        return condition(job)
    status = job.status
    phase = status.phase if status else None
    if phase == condition or (
        status and any(c.type == condition and c.status == "True" for c in status.conditions)
    ):
        return True
    if phase in ENDED:
        raise JobEndedError(f"job {job.name} ended {phase}, not {condition}")
    return False
