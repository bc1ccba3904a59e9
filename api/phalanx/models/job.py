"""The TrainingJob resource itself: identity (group, version, kind) plus spec and status."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from phalanx.models import names
from phalanx.models.base import KubeModel
from phalanx.models.rules import STORED
from phalanx.models.spec import TrainingJobSpec
from phalanx.models.status import TrainingJobStatus

GROUP: Final = "phalanx.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "TrainingJob"
PLURAL: Final = "trainingjobs"
SINGULAR: Final = "trainingjob"
SHORT_NAMES: Final = ("tj",)
CRD_NAME: Final = f"{PLURAL}.{GROUP}"


class ObjectMeta(KubeModel):
    """The standard Kubernetes object metadata; only the fields Phalanx reads are typed."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    """Name of the job, unique in its namespace. Its pods, Service and Lease are named after it,
    so it must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter) of
    at most 50 characters."""

    generate_name: str | None = None
    """Prefix of a name the API server generates when `name` is not set."""

    namespace: str | None = None
    """Namespace of the job."""

    labels: dict[str, str] | None = None
    """Labels of the job."""

    annotations: dict[str, str] | None = None
    """Annotations of the job."""

    generation: int | None = None
    """Spec generation, set by the API server."""

    uid: str | None = None
    """Unique id, set by the API server."""

    resource_version: str | None = None
    """Version of the object for optimistic concurrency, set by the API server."""


class TrainingJob(KubeModel):
    """A distributed PyTorch training job that survives failures by closing ranks.

    Phalanx runs it as a gang of node pods, restarts it at the best size the cluster can hold when
    pods or nodes fail, and resumes from the newest valid sharded checkpoint.
    """

    __cel_rules__ = (names.NAME_RULE,)

    api_version: Literal["phalanx.dev/v1alpha1"] = "phalanx.dev/v1alpha1"
    """APIVersion of the object: phalanx.dev/v1alpha1."""

    kind: Literal["TrainingJob"] = "TrainingJob"
    """Kind of the object: TrainingJob."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""

    spec: TrainingJobSpec
    """What the job runs and how it behaves under failure."""

    status: TrainingJobStatus | None = None
    """What the operator observed; written by the operator only."""

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> TrainingJob:
        """Validate a manifest as the API server would (strict types, no unknown fields)."""
        return cls.model_validate(manifest)

    @classmethod
    def from_stored(cls, raw: dict[str, Any]) -> TrainingJob:
        """Read a job the API server stored: it passed admission when it was created, so rules
        checked only at creation (its name's) are not checked again."""
        return cls.model_validate(raw, context=STORED)
