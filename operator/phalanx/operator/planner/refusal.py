"""A child object the API server refused as Invalid: a configuration error that lasts until the
spec changes, instead of a create that is retried (and refused) forever.

Why in the planner, and how it learns of it: the executor is the one that meets the refusal (an
HTTP 422 from a create). It maps it at the boundary to a `ChildRefusal` and reports it; the
reconcile loop hands that to the next plan as `Observed.refused`. From there the status is the
record: the `ConfigurationError` condition (reason `RefusedByAPIServer`) carries the API server's
words and the spec generation they answer, so a restarted operator does not try again either.
Changing the spec (a new generation) clears the condition and the job tries again. Like an image
that cannot be pulled, this is no restart and spends no restart budget.

A pod refused for want of an object the spec names (a ServiceAccount that does not exist) is the
same configuration error, reason `MissingObject`, but no change to the spec is needed to fix it:
the pods are created again every few seconds until it exists (`waiting_for_object`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.events import EventReason
from phalanx.operator.planner.classify import Verdict
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision

CONDITION: Final = ConditionType.CONFIGURATION_ERROR
REASON: Final = ConditionReason.REFUSED_BY_API_SERVER
MAX_MESSAGE: Final = 4096


MISSING_OBJECT: Final = ConditionReason.MISSING_OBJECT
RETRY_SECONDS: Final = 5
"""How soon pods refused for want of an object the spec names (a ServiceAccount) are tried
again: the user's fix is to create that object, which the operator is not told of."""


def waiting_for_object(d: Decision) -> bool:
    """A child refused until an object the spec names exists: ConfigurationError naming it,
    and the creates tried again every RETRY_SECONDS; the condition is resolved once the epoch's
    pods exist."""
    report = d.observed.refused
    current = d.condition(CONDITION)
    if report is None or report.lasting:
        if current is not None and current.status == "True" and current.reason == MISSING_OBJECT:
            pods = d.observed.node_pods(d.status.epoch)
            if d.status.nodes and len(pods) >= d.status.nodes:
                d.clear_condition(CONDITION, ConditionReason.RESOLVED)
        return False
    message = f"the API server refuses {report.kind} {report.name} until it exists: "
    message = (message + report.message)[:MAX_MESSAGE]
    if current is None or current.status != "True" or current.message != message:
        d.event(EventReason.CONFIGURATION_ERROR, message, "Warning")
    d.set_condition(CONDITION, True, MISSING_OBJECT, message)
    d.creation_refused = True  # not again in this plan: in RETRY_SECONDS
    d.requeue_at(d.now + timedelta(seconds=RETRY_SECONDS))
    return not d.status.current.launched


def refused(d: Decision, _: PlannerConfig) -> bool:
    """A child refused as Invalid for this spec: ConfigurationError, and no more creating."""
    if waiting_for_object(d):
        return True
    report = d.observed.refused
    if report is not None and report.lasting and report.generation == d.generation:
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
