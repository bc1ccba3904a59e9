"""Liveness before the first step: agents that fall silent, and start-ups that do not end.

Why: the step hang clock (`heartbeat.hang_deadline`) starts at an epoch's first reported step,
and every epoch has a window before it (imports, rendezvous, checkpoint load, the first step)
where a frozen rank would otherwise leave its peers waiting in a collective with the long
start-up timeout. Two rules cover that window:

- every agent renews its report each heartbeat period until its workers train (see
  `AgentReport.renewed`); a pod whose agent stays silent past the silence timeout is frozen,
  treated as a lost machine, and the gang restarts without it (a hot spare stands in);
- an epoch whose agents all report but whose first step does not come within the start-up
  timeout (startupTimeoutSeconds, or adaptive to the job's slowest earlier start-up) is stuck,
  and restarts whole.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from phalanx.models.assignment import PHASES
from phalanx.models.conditions import FailureReason
from phalanx.models.events import EventReason
from phalanx.operator.planner import congestion
from phalanx.operator.planner.classify import Verdict
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.heartbeat import Timeout, adaptive_timeout
from phalanx.operator.planner.inplace import BUSY_ACK_FACTOR
from phalanx.operator.planner.observed import Observed, PodView
from phalanx.operator.planner.recovery import restart, restart_size
from phalanx.operator.planner.stalls import peers_first

AGENT_SILENCE_SECONDS = 15.0
"""An agent that has not renewed its report for this long is frozen (hangTimeoutSeconds, when
shorter, takes its place). It renews every heartbeat period (2 s on a cluster), from a loop that
does nothing else, so 15 s is several missed renewals, not a busy moment."""

RENEWAL_SECONDS = 2.0
"""The agents' renewal period on a cluster (their heartbeat period): a frozen agent's last
renewal came up to this long before the freeze."""

MISSED_RENEWALS = 3
"""However short the timeout, a pod is silent only once its agent missed this many renewals."""

STARTUP_FLOOR_SECONDS = 120.0
"""The shortest adaptive start-up timeout, and the one used until an epoch of the job started."""

STARTUP_FACTOR = 3.0
"""An adaptive start-up timeout is this many times the job's slowest earlier start-up: a
resumed epoch loads a checkpoint its first epoch did not have, and restarts land on busier
machines."""


def silence_timeout(hang_timeout_seconds: int | None) -> Timeout:
    """How long an agent may go without renewing its report before its pod counts as frozen."""
    if hang_timeout_seconds is not None and hang_timeout_seconds < AGENT_SILENCE_SECONDS:
        return Timeout(hang_timeout_seconds, f"{hang_timeout_seconds} s: hangTimeoutSeconds")
    return Timeout(AGENT_SILENCE_SECONDS, f"{AGENT_SILENCE_SECONDS:.0f} s")


def startup_timeout(startup_timeout_seconds: int | None, slowest: float | None) -> Timeout:
    """The user's startupTimeoutSeconds if set; else max(floor, factor x the slowest start-up
    seen), and the floor before any."""
    return adaptive_timeout(
        startup_timeout_seconds, "startupTimeoutSeconds", slowest, STARTUP_FLOOR_SECONDS,
        STARTUP_FACTOR, "slowest start-up", "no start-up seen yet",
    )  # fmt: skip


def _last_word(pod: PodView) -> datetime | None:
    """When the pod's agent last said it is alive; None for an agent that does not renew its
    report (an image older than the renewals: only its state changes are known)."""
    return pod.agent.renewed if pod.agent is not None else None


def silent(
    observed: Observed, epoch: int, now: datetime, timeout: float
) -> tuple[list[PodView], datetime | None]:
    """Running node pods of `epoch` whose agent runs the epoch but has not renewed its report
    for `timeout` (and `MISSED_RENEWALS` of its periods) while its workers do not yet train; and
    when the next one would fall due."""
    frozen, due = [], None
    for pod in observed.node_pods(epoch).values():
        report = pod.agent
        if pod.phase != "Running" or pod.deleting or report is None:
            continue
        if report.state != "running" or report.epoch != epoch or report.phase == "training":
            continue
        last = _last_word(pod)
        if last is None:
            continue
        allowed = max(timeout, MISSED_RENEWALS * (report.renew_seconds or 0.0))
        deadline = last + timedelta(seconds=allowed)
        if now >= deadline:
            frozen.append(pod)
        else:
            due = deadline if due is None else min(due, deadline)
    return frozen, due


def tracks_phases(observed: Observed, epoch: int) -> bool:
    """The epoch's workers report their start-up phases (the reference trainer does; a program
    that does not is never judged by the start-up timeout, which would wrongly end it)."""
    return any(
        p.agent is not None and p.agent.epoch == epoch and p.agent.phase in PHASES
        for p in observed.node_pods(epoch).values()
    )


def frozen_agents(d: Decision, config: PlannerConfig) -> bool:
    """A pod whose agent fell silent before its workers train is frozen: restart without it.
    Where the epoch's agents watch each other, their word (PeerSilent) comes first; this is the
    rule for pods they cannot reach (UDP blocked between them)."""
    if d.status.phase not in ("Running", "Pending", "Restarting"):
        return False
    timeout = peers_first(
        silence_timeout(d.spec.failure_policy.hang_timeout_seconds), d, config,
        since_last_word=RENEWAL_SECONDS,
    )  # fmt: skip
    frozen, due = silent(d.observed, d.status.epoch, d.now, timeout.seconds)
    settle = config.assignment_settle_seconds
    if frozen and congestion.holds(d.observed.late_acks_at, d.now, settle):
        bound = timedelta(seconds=BUSY_ACK_FACTOR * timeout.seconds)  # see `congestion`
        frozen = [p for p in frozen if d.now - (_last_word(p) or d.now) >= bound]
        d.requeue_in(settle)
    if not frozen:
        if due is not None:
            d.requeue_at(due)
        return False
    verdicts = []
    for pod in frozen:
        report = pod.agent
        assert report is not None
        quiet = (d.now - (_last_word(pod) or d.now)).total_seconds()
        message = (
            f"its agent was silent for {quiet:.0f} s in phase {report.phase or 'starting'} "
            f"of epoch {d.status.epoch} (timeout {timeout.why})"
        )
        d.event(EventReason.HANG, f"pod {pod.name}: {message}", "Warning")
        verdicts.append(
            Verdict(
                "infrastructure", FailureReason.HANG, pod=pod.name, node=pod.node_name,
                message=message,
            )
        )  # fmt: skip
    names = frozenset(p.name for p in frozen)
    size = restart_size(d, names)
    d.observed = as_lost(d.observed, names)  # never carried into the new epoch
    restart(d, verdicts, size)
    d.delete_pods(sorted(names), force=True)  # a frozen agent cannot stop gracefully
    return True


def as_lost(observed: Observed, names: frozenset[str]) -> Observed:
    """The snapshot with these pods' machines presumed gone (phase Unknown)."""
    pods = tuple(
        dataclasses.replace(p, phase="Unknown") if p.name in names else p for p in observed.pods
    )
    return dataclasses.replace(observed, pods=pods)


def stuck_startup(d: Decision, _: PlannerConfig) -> bool:
    """An epoch whose first step has not come within the start-up timeout restarts whole."""
    status, current = d.status, d.status.current
    progress = status.progress
    if status.phase != "Running" or current.running_time is None:
        return False
    if progress is not None and progress.epoch == status.epoch:
        return False  # it trains: the step hang clock runs
    if not tracks_phases(d.observed, status.epoch):
        return False
    timeout = startup_timeout(d.spec.failure_policy.startup_timeout_seconds, status.startup_seconds)
    due = current.running_time + timedelta(seconds=timeout.seconds)
    if d.now < due:
        d.requeue_at(due)
        return False
    phases = sorted(
        {
            p.agent.phase
            for p in d.observed.node_pods(status.epoch).values()
            if p.agent and p.agent.phase
        },
        key=lambda phase: PHASES.index(phase) if phase in PHASES else len(PHASES),
    )
    message = (
        f"epoch {status.epoch} has not completed its first step "
        f"{(d.now - current.running_time).total_seconds():.0f} s after its pods ran "
        f"(phases: {', '.join(phases) or 'unknown'}; timeout {timeout.why})"
    )
    d.event(EventReason.STARTUP_TIMEOUT, message, "Warning")
    epoch = f"epoch {status.epoch}"
    restart(
        d, [Verdict("infrastructure", FailureReason.STARTUP_TIMEOUT, pod=epoch, message=message)]
    )
    return True
