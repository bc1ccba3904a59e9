"""The TrainingJob API (`phalanx.dev/v1alpha1`): the single source of truth for spec and status.

The CRD in `deploy/crds/` and in the chart is generated from these models (`make generate`).
This package imports no Kubernetes client, so every part of Phalanx can depend on it.
"""

from phalanx.models.errors import FieldError, field_errors
from phalanx.models.failure_policy import FailurePolicy
from phalanx.models.job import (
    API_VERSION,
    CRD_NAME,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    ObjectMeta,
    TrainingJob,
)
from phalanx.models.spec import (
    Checkpoint,
    Nccl,
    Parallelism,
    Replicas,
    TrainerSettings,
    TrainingJobSpec,
)
from phalanx.models.status import TrainingJobStatus

__all__ = [
    "API_VERSION",
    "CRD_NAME",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "Checkpoint",
    "FailurePolicy",
    "FieldError",
    "Nccl",
    "ObjectMeta",
    "Parallelism",
    "Replicas",
    "TrainerSettings",
    "TrainingJob",
    "TrainingJobSpec",
    "TrainingJobStatus",
    "field_errors",
]
