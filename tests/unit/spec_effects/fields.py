"""The spec's fields by path: what the registry of effects must cover."""

from __future__ import annotations

import inspect
import typing

from pydantic import BaseModel

from phalanx.models.spec import TrainingJobSpec
from phalanx.models.template import PodTemplate

WHOLE: frozenset[type[BaseModel]] = frozenset({PodTemplate})
"""Models that count as one field: the pod template is Kubernetes' own, and its effect is that
the pods are built from it, whatever it holds."""


def spec_field_paths(model: type[BaseModel] = TrainingJobSpec, prefix: str = "") -> list[str]:
    """Every leaf field under `model` as its camelCase path, e.g. `failurePolicy.backoff.maxSeconds`.
    Nested spec models (optional or not) are walked; their own fields are the leaves."""
    paths = []
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        nested = _nested_model(info.annotation)
        if nested is None or nested in WHOLE:
            paths.append(path)
        else:
            paths += spec_field_paths(nested, f"{path}.")
    return paths


def _nested_model(annotation: object) -> type[BaseModel] | None:
    """The model a field holds (`Model` or `Model | None`), or None for a plain value."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if inspect.isclass(candidate) and issubclass(candidate, BaseModel):
            return candidate
    return None


def field_value(model: BaseModel, path: str) -> object:
    """The value at a camelCase `path` under `model`; None below an unset optional object."""
    value: object = model
    for alias in path.split("."):
        if value is None:
            return None
        assert isinstance(value, BaseModel), f"{path}: {alias} is under a plain value"
        fields = type(value).model_fields
        name = next(n for n, info in fields.items() if (info.alias or n) == alias)
        value = getattr(value, name)
    return value


def descriptions(path: str, model: type[BaseModel] = TrainingJobSpec) -> list[str]:
    """The descriptions that speak for the field at camelCase `path`, nearest first: the field's
    own, then, for each enclosing object, its field's description and its model's docstring."""
    found: list[str] = []
    for alias in path.split("."):
        info = next(i for n, i in model.model_fields.items() if (i.alias or n) == alias)
        found.append(info.description or "")
        nested = _nested_model(info.annotation)
        if nested is not None and nested not in WHOLE:
            found.append(inspect.getdoc(nested) or "")
            model = nested
    return found[::-1]
