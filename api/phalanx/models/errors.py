"""Turn pydantic errors into the API server's shape: one `path: message` line per mistake.

Why: the local backend validates a manifest without a server and must say the same thing the API
server would, naming the field in the same dotted form (`spec.replicas.min`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from phalanx.models.base import CEL_ERROR_TYPE


@dataclass(frozen=True, slots=True)
class FieldError:
    """One refused field: where, and why."""

    field: str
    message: str
    source: Literal["rule", "schema"] = "schema"
    """"rule" for a `CelRule` (the API server shows the same message), "schema" otherwise."""

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _join_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def field_errors(error: ValidationError) -> list[FieldError]:
    """Each error of a failed `TrainingJob.model_validate`, with the dotted path of its field."""
    result = []
    for item in error.errors(include_url=False):
        path = _join_path(item["loc"])
        ctx = item.get("ctx") or {}
        if item["type"] == CEL_ERROR_TYPE:
            path = (path + str(ctx.get("field_path", ""))).lstrip(".")  # a root rule: ".metadata"
            result.append(FieldError(path, item["msg"], "rule"))
            continue
        if item["type"] == "extra_forbidden":
            result.append(FieldError(path, f'unknown field "{path}"'))
            continue
        result.append(FieldError(path, item["msg"]))
    return result
