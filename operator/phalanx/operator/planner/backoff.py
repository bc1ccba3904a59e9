"""Restart budgets and backoff: how many restarts a class may use, and how long to wait first.

Application failures back off exponentially (a crash loop should not hammer the cluster);
infrastructure restarts are immediate, because the fix (new pods elsewhere) needs no waiting.
"""

from __future__ import annotations

from phalanx.models.failure_policy import FailurePolicy
from phalanx.models.status import FailureClass, Restarts


def restart_delay(failure_class: FailureClass, consecutive: int, policy: FailurePolicy) -> float:
    """Seconds to wait before the next epoch's pods, after `consecutive` failures in a row."""
    if failure_class != "application" or consecutive < 1:
        return 0.0
    backoff = policy.backoff
    return float(min(backoff.initial_seconds * 2 ** (consecutive - 1), backoff.max_seconds))


def budget_exhausted(
    failure_class: FailureClass, restarts: Restarts, policy: FailurePolicy
) -> bool:
    """Whether a failure of this class may no longer be restarted."""
    if failure_class == "application":
        return restarts.application >= policy.max_restarts
    return restarts.infrastructure >= policy.max_infra_restarts


def budget_name(failure_class: FailureClass) -> str:
    """The spec field that bounds restarts of this class."""
    return "maxRestarts" if failure_class == "application" else "maxInfraRestarts"
