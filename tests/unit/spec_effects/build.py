"""Jobs that differ from one base spec in a few fields, and what a built job shows on its node
pod: the env contract as set, and as the trainer's settings models parse it."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from unittest import mock

from harness.jobs import DEFAULT_SPEC, job_manifest
from phalanx.models import TrainingJob, env
from phalanx.operator.builder import BuildSettings, node_pod
from phalanx.operator.builder.children import Manifest
from phalanx.operator.planner import elastic
from phalanx.pod import PodEnv
from phalanx.resume.settings import CheckpointSettings
from phalanx.trainer.config import TrainerConfig
from tests.support import container_env


class Unset(Enum):
    """Marks a field left out of the spec, so that its default applies."""

    UNSET = "unset"


UNSET = Unset.UNSET

Overrides = Mapping[str, object]
"""Spec fields by camelCase path (`checkpoint.keep`) and their values; UNSET leaves one out."""

Observer = Callable[[TrainingJob], object]
"""What of a built job shows a field: pod fields, env values, settings, planner decisions."""

BASE_SPEC: dict[str, Any] = DEFAULT_SPEC
"""Only the required fields (the tests' one job, `harness.jobs`): every other field is at
its default. The job is named `j`, like the pods of `tests.unit.planner.builders`."""


@dataclass(frozen=True)
class Effect:
    """How one spec field shows: `observe` sees `expect` in a job built with `variant`, and
    something else in one built with `baseline` (the field at its default, unless it says)."""

    variant: Overrides
    observe: Observer
    expect: object
    baseline: Overrides = field(default_factory=dict)


def job(overrides: Overrides) -> TrainingJob:
    """The base job with `overrides` applied, validated as the API server would."""
    spec = copy.deepcopy(BASE_SPEC)
    for path, value in overrides.items():
        *parents, last = path.split(".")
        tree = spec
        for key in parents:
            tree = tree.setdefault(key, {})
        if value is UNSET:
            tree.pop(last, None)
        else:
            tree[last] = value
    manifest = {**job_manifest(namespace="ns", metadata={"generation": 1}), "spec": spec}
    return TrainingJob.model_validate(manifest)


def built_pod(job: TrainingJob) -> Manifest:
    """Node pod rank 0 of epoch 1, at the size the job starts at."""
    return node_pod(job, 1, 0, elastic.target_size(job.spec), BuildSettings())


def pod_vars(job: TrainingJob) -> dict[str, str]:
    """The node pod's container's variables, its job's env ConfigMap's with them."""
    return container_env.built(job, built_pod(job))


@contextmanager
def _pod_environ(job: TrainingJob) -> Iterator[None]:
    """The process env as the node pod's container has it (no reserved names of this one)."""
    outside = {k: v for k, v in os.environ.items() if not env.is_reserved(k)}
    with mock.patch.dict(os.environ, {**outside, **pod_vars(job)}, clear=True):
        yield


def parsed_pod_env(job: TrainingJob) -> PodEnv:
    """The env contract as the agent and the workers parse it."""
    with _pod_environ(job):
        return PodEnv.read()


def parsed_trainer(job: TrainingJob) -> TrainerConfig:
    """The reference trainer's settings as it parses them from the pod's env."""
    with _pod_environ(job):
        return TrainerConfig()


def library_setting(name: str, setting: str) -> Observer:
    """Variable `name` on the node pod, and `CheckpointSettings.<setting>` as the resume library
    (the reference trainer and any script using phalanx.resume) parses it."""

    def observe(job: TrainingJob) -> tuple[str | None, object]:
        with _pod_environ(job):
            return pod_vars(job).get(name), getattr(CheckpointSettings.from_env(), setting)

    return observe


def pod_var(name: str) -> Observer:
    """Variable `name` on the node pod (None if unset), for variables a library reads itself."""
    return lambda job: pod_vars(job).get(name)


def contract(name: str, setting: str) -> Observer:
    """Variable `name` on the node pod, and `PodEnv.<setting>` parsed from it."""
    return lambda job: (pod_vars(job).get(name), getattr(parsed_pod_env(job), setting))


def trainer_setting(setting: str) -> Observer:
    """PHALANX_TRAINER_<SETTING> on the node pod, and `TrainerConfig.<setting>` parsed from it
    (the trainer's settings read that variable by that name)."""
    name = f"{env.PHALANX_PREFIX}TRAINER_{setting.upper()}"
    return lambda job: (pod_vars(job).get(name), getattr(parsed_trainer(job), setting))
