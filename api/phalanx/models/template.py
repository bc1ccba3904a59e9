"""The node-pod template: a PodTemplateSpec typed only where Phalanx must look inside it.

Why partial: the operator passes volumes, resources, probes and the rest through untouched, so
those stay opaque (kept, not checked here; the pod itself is validated when it is created). What
Phalanx depends on is typed: the containers, their env (reserved names are refused at admission)
and the restart policy (the operator, not the kubelet, restarts a gang).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from phalanx.models import env as env_contract
from phalanx.models.base import OpaqueObject, SpecModel
from phalanx.models.rules import CelRule

MAX_CONTAINERS = 16
MAX_ENV = 512
MAX_NAME = 253

_reserved_names_cel = ", ".join(f"'{n}'" for n in sorted(env_contract.RESERVED_NAMES))
_reserved_prefixes_cel = " && ".join(
    f"!e.name.startsWith('{p}')" for p in env_contract.RESERVED_PREFIXES
)
RESERVED_ENV_MESSAGE = (
    "env must not set a name Phalanx reserves: "
    + ", ".join(sorted(env_contract.RESERVED_NAMES))
    + ", or any name starting with "
    + ", ".join(env_contract.RESERVED_PREFIXES)
    + " (the operator and the agent set them)"
)


class EnvVar(SpecModel):
    """An environment variable of a container."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
    """Name of the variable. Names Phalanx sets itself (RANK, WORLD_SIZE, MASTER_ADDR, PET_*,
    PHALANX_*...) are refused."""

    value: str | None = None
    """Value of the variable."""

    value_from: OpaqueObject | None = None
    """Source of the value (secret, config map, field or resource reference)."""


class Container(SpecModel):
    """A container of the node pod. The operator adds the env contract to every container."""

    model_config = ConfigDict(extra="allow")
    __cel_rules__ = (
        CelRule(
            rule=(
                "!has(self.env) || self.env.all(e, "
                f"!(e.name in [{_reserved_names_cel}]) && {_reserved_prefixes_cel})"
            ),
            message=RESERVED_ENV_MESSAGE,
            field_path=".env",
            reason="FieldValueForbidden",
            check=lambda c: not any(env_contract.is_reserved(e.name) for e in c.env or ()),
        ),
    )

    name: Annotated[str, Field(min_length=1, max_length=63)]
    """Name of the container (a DNS label)."""

    image: Annotated[str, Field(min_length=1, max_length=4096)]
    """Container image, e.g. the Phalanx trainer image or your own."""

    command: list[str] | None = None
    """Entrypoint. Defaults to the image's; the trainer image's entrypoint is the Phalanx agent."""

    args: list[str] | None = None
    """Arguments to the entrypoint."""

    env: Annotated[list[EnvVar] | None, Field(max_length=MAX_ENV)] = None
    """Environment variables. Must not use names Phalanx reserves."""

    resources: OpaqueObject | None = None
    """Compute resources (requests and limits), e.g. `nvidia.com/gpu`."""


class PodTemplateMetadata(SpecModel):
    """Labels and annotations for the node pods; Phalanx adds its own labels."""

    labels: dict[str, str] | None = None
    """Labels to put on every node pod."""

    annotations: dict[str, str] | None = None
    """Annotations to put on every node pod."""


class PodSpec(SpecModel):
    """The node pod's spec. Fields not described here are passed to the pod unchanged."""

    model_config = ConfigDict(extra="allow")

    containers: Annotated[list[Container], Field(min_length=1, max_length=MAX_CONTAINERS)]
    """Containers of the node pod; at least one."""

    restart_policy: Literal["Never"] | None = None
    """Must be Never (the default): Phalanx restarts the whole gang, not the kubelet one pod."""


class PodTemplate(SpecModel):
    """Template of a node pod: one pod runs `nprocPerNode` worker processes."""

    metadata: PodTemplateMetadata | None = None
    """Labels and annotations for the node pods."""

    spec: PodSpec
    """Spec of the node pods."""
