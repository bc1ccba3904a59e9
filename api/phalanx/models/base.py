"""The base of every TrainingJob model: Kubernetes field naming, docstrings as descriptions, and
CEL rules checked in Python too.

Why a base class: the CRD is generated from these models, so the conventions that make the CRD
right (camelCase names, a description on every field, unknown fields refused) must hold for every
model without each one repeating them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from phalanx.models.rules import CelRule, applies

CEL_ERROR_TYPE = "cel_rule"
"""The pydantic error type of a failed `CelRule`; its context carries the rule's field path."""


class KubeModel(BaseModel):
    """A part of a Kubernetes object: camelCase on the wire, every field described, no extras."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        validate_default=False,
    )

    __cel_rules__: ClassVar[tuple[CelRule, ...]] = ()
    """The `x-kubernetes-validations` of this model's schema, also checked by `_check_cel_rules`."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """Publish the model's CEL rules in its JSON schema, from which the CRD is generated."""
        schema = handler(core_schema)
        rules = cls.__cel_rules__
        if rules:
            target: dict[str, Any] = handler.resolve_ref_schema(schema)
            target["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
        return schema

    @model_validator(mode="after")
    def _check_cel_rules(self, info: ValidationInfo) -> Self:
        for rule in type(self).__cel_rules__:
            if applies(rule, info.context) and rule.check is not None and not rule.check(self):
                raise PydanticCustomError(
                    CEL_ERROR_TYPE,
                    "{message}",
                    {"message": rule.message, "field_path": rule.field_path or ""},
                )
        return self

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase, unset optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SpecModel(KubeModel):
    """A part of `spec`: types are strict, as the API server's are ("2" is not an integer)."""

    model_config = ConfigDict(strict=True)


class OpaqueObject(KubeModel):
    """A Kubernetes object Phalanx passes through untouched (resources, volumes, probes...)."""

    model_config = ConfigDict(extra="allow")


def object_default(model: type[SpecModel]) -> Any:
    """A nested object that exists even when omitted, so its own defaults always apply.

    The CRD gets the model's full default object (the API server validates a default against the
    CEL rules as it stands, before nested defaulting); Python gets a fresh instance of `model`.
    """
    default = model().model_dump(mode="json", by_alias=True, exclude_none=True)
    return Field(default_factory=model, json_schema_extra={"default": default})
