"""Validation rules stated once, enforced twice: by the API server (CEL) and in Python.

Why: the API server must refuse a bad TrainingJob by itself (a CRD `x-kubernetes-validations`
rule), and the local backend must refuse the same manifest with the same words without a server.
Each `CelRule` therefore carries the CEL expression, the message, the field it points at, and an
equivalent Python predicate. The CRD generator emits the first three; `KubeModel` evaluates the
predicate. Parity is tested against the real API server with `tests/fixtures/invalid/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CelRule:
    """One `x-kubernetes-validations` entry on the schema of the model that declares it."""

    rule: str
    """The CEL expression. `self` is the object the rule sits on; `oldSelf` its previous version."""

    message: str
    """What the user sees. It names the field and says what is allowed."""

    field_path: str | None = None
    """Where the error points, relative to `self` (e.g. `.min`), so the API server names it."""

    check: Callable[[Any], bool] | None = None
    """The same rule in Python, given the validated model. None for transition rules, which
    compare the object with its previous version and therefore only the API server can check."""

    reason: str = "FieldValueInvalid"
    """The API server's cause type: FieldValueInvalid, FieldValueForbidden, FieldValueRequired..."""

    create_only: bool = False
    """Checked only when the object is created, for what cannot change afterwards (its name):
    objects created before the rule existed can still be updated. The CRD gets `oldSelf` as an
    optional (`optionalOldSelf`) and skips the rule when it has a value; Python skips it when
    reading a stored object (validation context `STORED`)."""

    def to_schema(self) -> dict[str, Any]:
        """The rule as it appears in the CRD's `x-kubernetes-validations` list."""
        entry: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.create_only:
            entry["rule"] = f"oldSelf.hasValue() || ({self.rule})"
            entry["optionalOldSelf"] = True
        if self.field_path:
            entry["fieldPath"] = self.field_path
        if self.reason != "FieldValueInvalid":
            entry["reason"] = self.reason
        return entry


STORED: dict[str, Any] = {"stored": True}
"""Validation context for an object read back from the API server: it was admitted when it was
created, so create-only rules do not apply (`Model.model_validate(raw, context=STORED)`)."""


def applies(rule: CelRule, context: Any) -> bool:
    """Whether Python checks `rule` under this validation context."""
    stored = isinstance(context, dict) and context.get("stored") is True
    return rule.check is not None and not (rule.create_only and stored)


def immutable(field_label: str) -> CelRule:
    """A transition rule that refuses any change of the field it sits on after creation."""
    return CelRule(
        rule="self == oldSelf",
        message=f"{field_label} is immutable: it cannot change after the job is created",
        reason="FieldValueForbidden",
    )
