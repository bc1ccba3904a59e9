"""What job control answers, whichever way it is reached: the REST API's bodies, the SDK's return
values, the CLI's `-o json`. camelCase on the wire, like Kubernetes.

Why here, with the models: the service, the SDK and the CLI's kubeconfig mode all speak these
shapes, and none of them may import another's internals; the job's spec and status are the
TrainingJob models themselves and an event is the one `JobEvent`, so server, SDK and CRD cannot
disagree."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from phalanx.models.events import JobEvent
from phalanx.models.spec import TrainingJobSpec
from phalanx.models.status import CheckpointRef, Phase, TrainingJobStatus


class Schema(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class JobSummary(Schema):
    """One row of a job list."""

    namespace: str
    name: str
    phase: Phase | None = None
    nodes: int = 0
    world_size: int = 0
    spares: int = 0
    """Hot spares ready to take a failed node's rank."""
    epoch: int = 0
    step: int | None = None
    restarts: int = 0
    goodput: float | None = None
    eta: datetime | None = None
    """When training is expected to reach its last step (status.progress.eta)."""
    created: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class JobList(Schema):
    """A page of jobs; pass `continue` back to get the next page."""

    items: list[JobSummary]
    continue_: str | None = Field(default=None, alias="continue")
    remaining: int = 0
    """Jobs after this page that match the filters."""


class JobDetail(Schema):
    """A job with its spec and status: progress, conditions, failures, last checkpoint."""

    namespace: str
    name: str
    uid: str | None = None
    created: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    spec: TrainingJobSpec
    status: TrainingJobStatus | None = None


class ScaleRequest(Schema):
    """The desired number of node pods (within the job's replicas.min..max)."""

    nodes: Annotated[int, Field(ge=1)]


class FieldProblem(Schema):
    """One refused field of a manifest."""

    field: str
    message: str


class Problem(Schema):
    """An error: `detail` says what went wrong (for 422, one entry per field)."""

    detail: str | list[FieldProblem] | list[dict[str, Any]]


class EventList(Schema):
    """A job's events, oldest first."""

    items: list[JobEvent]


class Checkpoints(Schema):
    """Where the job checkpoints, the newest committed checkpoint it reported, and the cadence
    it really saves at next to the one its spec asks for."""

    location: str
    last: CheckpointRef | None = None
    keep: int
    interval_steps: int | None = None
    """Steps between the program's two newest committed checkpoints, as it reported them
    (status.checkpointIntervalSteps): what it does. Null until two are reported; always null for
    a program that reports none (see `note`)."""
    requested_interval_steps: int
    """spec.checkpoint.intervalSteps: what the reference trainer and scripts using
    phalanx.resume save at. Other programs keep their own cadence."""
    note: str | None = None
    """Why `interval_steps` is unknown, when it is."""


class Health(Schema):
    status: str


class HistoryPoint(Schema):
    """The job at one moment: what its status said when the watch saw it change."""

    time: datetime
    phase: Phase | None = None
    epoch: int = 0
    nodes: int = 0
    world_size: int = 0
    step: int | None = None
    samples_per_second: float | None = None
    loss: float | None = None


class JobHistory(Schema):
    """The job's trajectory since this service started watching (`since`), oldest first."""

    since: datetime
    points: list[HistoryPoint]
