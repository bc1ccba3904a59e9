"""One shape for "an event": something that happened to a job, worth telling its user.

Why one model: the planner decides events, the operator writes them as Kubernetes Events, the
local backend records them in a run's summary, and the REST API lists a job's events; all four
speak of the same facts (when, Normal or Warning, a CamelCase reason, a message), so they share
this model and its wire names.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from phalanx.models.base import KubeModel

EventType = Literal["Normal", "Warning"]


class EventReason(StrEnum):
    """The reasons of the events Phalanx emits: the planner's decisions, and what a local run
    saw happen. `JobEvent.reason` stays a string, since Kubernetes' own events about a job (and
    the events of other versions) may carry any word."""

    STARTED = "Started"
    SUSPENDED = "Suspended"
    RESUMED = "Resumed"
    RESTART = "Restart"
    RECOVERED = "Recovered"
    SHRINK = "Shrink"
    GROW = "Grow"
    HANG = "Hang"
    STRAGGLER = "Straggler"
    QUEUED = "Queued"
    """A job labelled with a Kueue queue waits for its Workload's admission."""
    ADMITTED = "Admitted"
    """Kueue admitted the job's Workload: it runs at the admitted size."""
    EVICTED = "Evicted"
    """Kueue evicts the job's Workload: its ranks save their step and stop."""
    DRAIN = "Drain"
    """A node is being taken away: its ranks save their step and move (a planned resize)."""
    CHECKPOINT_FAILED = "CheckpointFailed"
    STARTUP_TIMEOUT = "StartupTimeout"
    CONFIGURATION_ERROR = "ConfigurationError"
    AGENT_NOT_INJECTED = "AgentNotInjected"
    GANG_SCHEDULING_UNAVAILABLE = "GangSchedulingUnavailable"
    BUDGET_EXHAUSTED = "BudgetExhausted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    # Seen by a local run only:
    CAPACITY = "Capacity"
    """The local cluster's node count changed (--capacity-schedule)."""
    FAULT_INJECTED = "FaultInjected"
    NO_STEPS = "NoSteps"
    """A fault or capacity change waits for a step the program will never report."""


class JobEvent(KubeModel):
    """An event about a TrainingJob."""

    reason: str = ""
    """One CamelCase word: Started, Restart, Shrink, Grow, Hang, Succeeded, Capacity..."""

    message: str = ""
    """What happened."""

    type: EventType = "Normal"
    """Normal or Warning."""

    time: datetime | None = None
    """When it happened; None for an event still to be emitted (it happens when it is)."""

    count: int | None = None
    """How many times Kubernetes saw it (an Event the API server aggregated); None otherwise."""

    def at(self, time: datetime) -> JobEvent:
        """This event as it happened at `time`."""
        return self.model_copy(update={"time": time})
