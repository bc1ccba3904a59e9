"""Operator-wide planner knobs that are not part of a job's spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from phalanx.operator.planner.decision import Decision


@dataclass(frozen=True)
class PlannerConfig:
    """Operator-wide knobs that are not part of a job's spec."""

    grow_cooldown_seconds: float = 60.0
    """Least time an epoch runs before the job grows again (no thrashing)."""
    excluded_namespaces: frozenset[str] = frozenset()
    """Namespaces where the operator runs no job (a cluster-wide install's system namespaces):
    a TrainingJob there fails at once with `NamespaceExcluded`, nothing created."""
    straggler_min_window: int = 10
    """Least number of steps a heartbeat's step-time window must cover to judge stragglers."""
    straggler_min_cost: float = 0.1
    """Least share of a step a straggler must cost the gang (its compute beyond the others'
    median, against the step time): a rank twice as slow at work that takes microseconds of a
    100 ms step (a small script's forward pass, where scheduling noise alone doubles it) costs
    nothing a restart would win back."""
    retire_poll_seconds: float = 2.0
    """How soon to look again while old pods terminate (pod events usually come first)."""
    assignment_ack_seconds: float = 10.0
    """A pod carried into a new epoch whose agent has not started it this long after is
    replaced (a frozen or lost machine that its node status does not show yet). The agent sees
    an assignment through a Lease watch (well under a second) and reports at once; until then
    the rest of the gang waits for it at the rendezvous."""
    step_wait_seconds: float = 60.0
    """How long after an epoch's pods all ran a program that has reported no step, and whose
    agents report no start-up phase, counts as one that reports none (see `planner.progress`).
    What is measured does not depend on it (a recovery then ends when the pods ran); only when
    the status says so does."""
    failure_settle_seconds: float = 1.0
    """How long an application failure that agents reported waits for the other ranks' reports
    before the gang restarts, unless every rank has reported: a worker killed by the platform
    is often reported after the peers whose collective it broke (a plain script's peers exit 1
    on "connection reset"), and the restart's class, budget and cause must be the kill's. Only
    application failures wait this long (and the peers' collective failures, see
    `silence_settle_seconds`); any other is decided at once."""
    silence_settle_seconds: float = 6.0
    """How long the peers' collective failures, with no cause at hand, wait for a silent peer
    to be found where the epoch's agents watch each other: `phalanx.agent.peers` finds a peer
    silent after 4 s unheard (2 s once the finder's own workers failed), its pings go every
    half second, and the report takes its way through the API server. A lost machine then
    costs one restart, without it; a cause that turns up (a killed worker's own report) ends
    the wait at once."""
    peers_first_seconds: float = 8.0
    """Where the epoch's agents watch each other, a shorter timeout of a rule that a frozen
    machine trips too (the step that stalls, hangTimeoutSeconds) is held to this, so that the
    peers' word (PeerSilent, about 5 s after the freeze) comes first, with a margin for a
    loaded machine: the restart then leaves the frozen pod out (one restart, not two)."""
    assignment_settle_seconds: float = 2.0
    """Sooner than `assignment_ack_seconds`: a carried-over pod whose agent is still silent
    this long after the epoch began, while every other carried-over agent already started it,
    is replaced (see `inplace.unresponsive`)."""


Step = Callable[[Decision, PlannerConfig], bool]
"""A rung of the ladder: adds to the decision, returns True to stop the ladder."""


def seconds(value: float) -> timedelta:
    """A duration in seconds."""
    return timedelta(seconds=value)
