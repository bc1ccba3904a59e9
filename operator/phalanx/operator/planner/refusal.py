"""A child object the API server refused as Invalid: a configuration error that lasts until the
spec changes, instead of a create that is retried (and refused) forever.

Why in the planner, and how it learns of it: the executor is the one that meets the refusal (an
HTTP 422 from a create). It maps it at the boundary to a `ChildRefusal` and reports it; the
reconcile loop hands that to the next plan as `Observed.refused`. From there the status is the
record: the `ConfigurationError` condition (reason `RefusedByAPIServer`) carries the API server's
words and the spec generation they answer, so a restarted operator does not try again either.
Changing the spec (a new generation) clears the condition and the job tries again. Like an image
that cannot be pulled, this is no restart and spends no restart budget.
"""

from __future__ import annotations

from typing import Final

from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.events import EventReason
from phalanx.operator.planner.classify import Verdict
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision

CONDITION: Final = ConditionType.CONFIGURATION_ERROR
REASON: Final = ConditionReason.REFUSED_BY_API_SERVER
MAX_MESSAGE: Final = 4096


def refused(d: Decision, _: PlannerConfig) -> bool:
    """A child refused as Invalid for this spec: ConfigurationError, and no more creating."""
    report = d.observed.refused
    if report is not None and report.generation == d.generation:
        message = f"the API server refused {report.kind} {report.name}: {report.message}"
        message = message[:MAX_MESSAGE]
        current = d.condition(CONDITION)
        if current is None or current.status != "True" or current.message != message:
            pod = report.name if report.kind == "Pod" else None
            d.record_failure(Verdict("configuration", REASON, pod=pod, message=message))
            d.event(EventReason.CONFIGURATION_ERROR, message, "Warning")
        d.set_condition(CONDITION, True, REASON, message)
    elif not _in_effect(d):
        current = d.condition(CONDITION)
        if current is not None and current.reason == REASON:
            d.clear_condition(CONDITION, ConditionReason.SPEC_CHANGED)
        return False
    d.creation_refused = True
    # An epoch whose pods are not all created cannot start: stop here. A launched one (a standby
    # pod was refused) keeps being watched; it only gets no more objects.
    return not d.status.current.launched


def _in_effect(d: Decision) -> bool:
    """The status records a refusal of this very spec."""
    current = d.condition(CONDITION)
    return (
        current is not None
        and current.status == "True"
        and current.reason == REASON
        and current.observed_generation == d.generation
    )
