"""`spec.failurePolicy`: restart budgets, backoff, and the timeouts of failure detection."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from phalanx.models.base import SpecModel, object_default
from phalanx.models.rules import CelRule

ExitCode = Annotated[int, Field(ge=1, le=255)]


class Backoff(SpecModel):
    """Exponential backoff between restarts."""

    __cel_rules__ = (
        CelRule(
            rule="self.maxSeconds >= self.initialSeconds",
            message=(
                "spec.failurePolicy.backoff.maxSeconds must be greater than or equal to "
                "spec.failurePolicy.backoff.initialSeconds"
            ),
            field_path=".maxSeconds",
            check=lambda b: b.max_seconds >= b.initial_seconds,
        ),
    )

    initial_seconds: Annotated[int, Field(ge=1)] = 10
    """Delay before the first restart; it doubles with each restart in a row."""

    max_seconds: Annotated[int, Field(ge=1)] = 300
    """Longest delay between restarts."""


class FailurePolicy(SpecModel):
    """How the job reacts to failures, by class (application, infrastructure, configuration).
    Reaches: every program."""

    max_restarts: Annotated[int, Field(ge=0)] = 3
    """Restarts allowed for application failures (non-zero exits of user code)."""

    max_infra_restarts: Annotated[int, Field(ge=0)] = 20
    """Restarts allowed for infrastructure failures (OOM, eviction, lost node, hang...)."""

    backoff: Backoff = object_default(Backoff)
    """Delay between restarts."""

    retryable_exit_codes: Annotated[list[ExitCode], Field(max_length=64)] = Field(
        default_factory=list
    )
    """Exit codes that mean a transient failure: they count as infrastructure, not application."""

    hang_timeout_seconds: Annotated[int | None, Field(ge=1)] = None
    """A training step that does not advance for this long is a hang and restarts the gang. The
    clock starts at each epoch's first reported step. Unset, the timeout adapts to the job: 10 x
    the slowest rank's mean step time (status.progress.stepSeconds), at least 30 s, and 30 s until
    the trainer first reports step times. Set it for steps longer than 30 s, or for pauses between
    steps longer than the adaptive timeout (blocking checkpoint saves, evaluation). Before the
    first step, a pod whose agent stops reporting for this long (15 s at most) is frozen,
    whatever the phase of its start. Where the pods' agents ping each other (in-place pods),
    a frozen machine is found by its peers in about 5 s (PeerSilent), and both timeouts are
    held to 8 s at least (10 s from an agent's last report) so that their word comes first.
    For any program under the agent, reporting or not, a worker process that stays stopped
    (SIGSTOP) this long (10 s when unset) is a hang too, found by its agent in the process
    table.
    Reaches: programs under the agent, programs that report progress."""

    startup_timeout_seconds: Annotated[int | None, Field(ge=1)] = None
    """An epoch whose first step has not completed this long after all its node pods run is
    stuck in start-up (rendezvous, checkpoint load, first step) and restarts, although every
    agent still reports. Unset, it adapts to the job: 3 x its slowest earlier start-up
    (status.startupSeconds), at least 120 s. Set it when an epoch's start legitimately takes
    longer (a large checkpoint on slow storage), or shorter to catch a stuck start sooner. It
    needs the phases of a start and a first step reported (phalanx.progress, the frameworks'
    callbacks, phalanx.resume, the reference trainer). Reaches: programs that report progress."""

    straggler_factor: Annotated[float, Field(gt=1)] = 2.0
    """A rank whose compute time per step (its own work, not its waits for peers), its median
    over 20 steps, stays above this factor times the other ranks', costing the gang at least 10 %
    of a step, is a straggler: the gang restarts off its node. Programs that do not time their
    compute are judged by step time. Reaches: programs that report progress."""

    schedule_timeout_seconds: Annotated[int, Field(ge=1)] = 300
    """Pods still unschedulable after this long make the job shrink (or, at min, wait)."""
