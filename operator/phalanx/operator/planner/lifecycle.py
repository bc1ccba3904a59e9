"""Job lifetime policies: success, active deadline and TTL after finishing."""

from __future__ import annotations

from datetime import datetime, timedelta

from phalanx.models.spec import TrainingJobSpec
from phalanx.models.status import TrainingJobStatus
from phalanx.operator.planner.observed import PodView


def succeeded(pods: dict[int, PodView], nodes: int) -> bool:
    """All node ranks of the epoch exited 0."""
    return len(pods) == nodes and all(p.phase == "Succeeded" for p in pods.values())


def deadline(spec: TrainingJobSpec, status: TrainingJobStatus) -> datetime | None:
    """When activeDeadlineSeconds runs out, if set and the job has started."""
    if spec.active_deadline_seconds is None or status.start_time is None:
        return None
    return status.start_time + timedelta(seconds=spec.active_deadline_seconds)


def ttl_expiry(spec: TrainingJobSpec, status: TrainingJobStatus) -> datetime | None:
    """When a finished job is deleted, if ttlSecondsAfterFinished is set."""
    if spec.ttl_seconds_after_finished is None or status.completion_time is None:
        return None
    return status.completion_time + timedelta(seconds=spec.ttl_seconds_after_finished)
