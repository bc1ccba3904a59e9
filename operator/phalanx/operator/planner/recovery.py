"""Steps that react to failure: classify and restart, and giving up (a rank alive but stuck or
slow: `stalls`).

A restart is always a new epoch for the whole gang, counted against the budget of the failure's
class, after the class's backoff. Pods whose agent answers carry over into it (see `inplace`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from phalanx.models.conditions import ConditionReason, ConditionType, EpochReason, FailureReason
from phalanx.models.events import EventReason
from phalanx.models.status import FailureClass
from phalanx.operator.planner import backoff, elastic, inplace
from phalanx.operator.planner.classify import Facts, Verdict, classify, restart_class
from phalanx.operator.planner.config import PlannerConfig, seconds
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.observed import PodView

CONSEQUENCES = frozenset({
    FailureReason.COLLECTIVE_FAILURE, FailureReason.PREFLIGHT_FAILED,
    FailureReason.CHECKPOINTED_STOP,
})  # fmt: skip
"""Reasons that are usually a peer's failure seen from the other ranks: not named as the cause
while another failure of the same class is at hand."""


def failures(d: Decision, config: PlannerConfig) -> bool:
    """Classify failed node pods; restart the gang, or set a configuration condition."""
    pods = d.observed.node_pods(d.status.epoch)
    facts = Facts(d.observed.nodes, frozenset(d.spec.failure_policy.retryable_exit_codes))
    verdicts = [v for p in pods.values() if (v := classify(p, facts))]
    late, look_again = inplace.unresponsive(
        d.observed, d.status.epoch, d.status.current, d.now,
        config.assignment_ack_seconds, config.assignment_settle_seconds,
    )  # fmt: skip
    if look_again is not None:
        d.requeue_at(look_again)
    started = d.status.current.start_time
    verdicts += [
        Verdict(
            "infrastructure", FailureReason.AGENT_UNRESPONSIVE, pod=p.name, node=p.node_name,
            message=f"its agent had not started epoch {d.status.epoch} "
            f"{(d.now - started).total_seconds() if started else 0:.1f} s after it began",
        )
        for p in late
    ]  # fmt: skip
    if d.status.current.launched:
        verdicts += [
            Verdict("infrastructure", FailureReason.POD_DELETED, pod=f"node rank {rank}")
            for rank in range(d.status.nodes)
            if rank not in pods
        ]
    silences = inplace.silent(d.observed, d.status.epoch)
    named = {v.pod for v in verdicts}
    verdicts += [
        Verdict(
            "infrastructure", FailureReason.PEER_SILENT, pod=s.pod.name, node=s.pod.node_name,
            message=f"node rank {s.heard_by.rank}'s agent had not heard node rank "
            f"{s.pod.rank}'s for {s.seconds:.1f} s (a frozen or cut-off machine)",
        )
        for s in silences
        if s.pod.name not in named
    ]  # fmt: skip
    gone = frozenset({*(p.name for p in late), *(s.pod.name for s in silences)})
    if _awaits_graceful_stop(d, verdicts) or _awaits_peers(d, verdicts, config):
        return True
    if without := [v for v in verdicts if v.reason == FailureReason.AGENT_CANNOT_RUN]:
        run_without_agent(d, without[0])
        return True
    configuration = [v for v in verdicts if v.failure_class == "configuration"]
    restartable = [v for v in verdicts if v.failure_class != "configuration"]
    if restartable:
        restart(d, restartable, restart_size(d, gone), gone)
        return True
    if configuration:
        first = configuration[0]
        message = f"pod {first.pod}: {first.reason}" + (
            f": {first.message}" if first.message else ""
        )
        current = d.condition(ConditionType.CONFIGURATION_ERROR)
        if current is None or current.status != "True":
            d.record_failure(first)
            d.event(EventReason.CONFIGURATION_ERROR, message, "Warning")
        d.set_condition(ConditionType.CONFIGURATION_ERROR, True, first.reason, message)
        return True
    current = d.condition(ConditionType.CONFIGURATION_ERROR)
    missing = current is not None and current.reason == ConditionReason.MISSING_OBJECT
    if not d.creation_refused and not missing:  # those are `refusal`'s to resolve
        d.clear_condition(ConditionType.CONFIGURATION_ERROR, ConditionReason.RESOLVED)
    return False


def _awaits_graceful_stop(d: Decision, verdicts: list[Verdict]) -> bool:
    """A pod is being stopped gracefully (preempted, evicted, deleted: `PodView.stop_deadline`)
    while the epoch's workers still run: wait for them to stop, until the pod's deadline at the
    latest. Its agent passed SIGTERM on; the workers agree on it at the step's end, save that
    step and stop (exit 77 where they were not signalled), so the restart resumes from it and
    redoes no step. Restarting at once would stop them before their save. No wait when another
    fault broke the gang, or once no worker of the epoch runs."""
    pods = {p.name: p for p in d.observed.node_pods(d.status.epoch).values()}
    stopping = {
        v.pod
        for v in verdicts
        if v.pod in pods
        and pods[v.pod].stop_deadline is not None
        and pods[v.pod].phase == "Running"
    }
    if not stopping or any(
        v.pod not in stopping and v.reason not in CONSEQUENCES for v in verdicts
    ):
        return False
    working = workers_running(pods.values(), d.status.epoch)
    deadlines = [pods[name].stop_deadline for name in stopping]
    until = min(t for t in deadlines if t is not None)
    if not working or d.now >= until:
        return False
    d.requeue_at(until)
    return True


def workers_running(pods: Iterable[PodView], epoch: int) -> list[PodView]:
    """Pods whose agent reports the epoch's workers running (a graceful stop waits for them)."""
    return [
        p
        for p in pods
        if p.phase == "Running"
        and p.agent is not None
        and p.agent.epoch == epoch
        and p.agent.state == "running"
    ]


def _awaits_peers(d: Decision, verdicts: list[Verdict], config: PlannerConfig) -> bool:
    """Wait, briefly, for the other ranks' reports while no cause is known, only application
    failures (`PlannerConfig.failure_settle_seconds`) or the peers' collective failures: where
    the epoch's agents watch each other, as long as a silent peer takes to be found
    (`PlannerConfig.silence_settle_seconds`), so that a lost machine costs one restart, without
    it, not one with it and another when it does not answer. A look again is due when the wait
    ends; a cause that turns up ends it."""
    if not verdicts or len(verdicts) >= d.status.nodes:
        return False  # nothing yet, or every rank has spoken
    if any(v.failure_class != "application" and v.reason not in CONSEQUENCES for v in verdicts):
        return False
    settle = 0.0
    if any(v.failure_class == "application" for v in verdicts):
        settle = config.failure_settle_seconds
    if inplace.watched(d.observed, d.status.epoch):
        settle = max(settle, config.silence_settle_seconds)
    reported = [v.pod for v in verdicts]
    moments = _moments(d)
    if not settle or not all(pod in moments for pod in reported):
        return False  # a pod's own exit: nothing more will come from its agent
    first = min(min(moments[pod] for pod in reported), d.now)
    until = first + seconds(settle)
    if d.now >= until:
        return False
    d.requeue_at(until)
    return True


def run_without_agent(d: Decision, verdict: Verdict) -> None:
    """The agent injected into the pods cannot run in the job's image: say once what the job
    loses, and run the epoch again without it. Not the job's failure: no budget is charged."""
    why = verdict.message or "the runtime could not start its interpreter"
    message = (
        f"the agent injected into pod {verdict.pod} could not run ({why.strip()[:300]}): the "
        "job runs its command without it, so without in-place restarts, hot spares, start-up "
        "and hang detection; name the image's Python 3.9+ in spec.agent.python to have them, "
        "or set spec.agent.inject to false"
    )
    d.record_failure(verdict)
    d.set_condition(ConditionType.AGENT_INJECTED, False, ConditionReason.AGENT_CANNOT_RUN, message)
    d.event(EventReason.AGENT_NOT_INJECTED, message, "Warning")
    d.start_epoch(d.status.nodes, reason=EpochReason.RESTART)


def restart(
    d: Decision, verdicts: list[Verdict], size: int | None = None,
    gone: frozenset[str] = frozenset(),
) -> None:  # fmt: skip
    """Restart the gang in a new epoch, within the restart budget of the failure's class. Pods
    in `gone` (silent, unresponsive) do not carry over into it, whatever their status says."""
    failure_class = restart_class(verdicts)
    cause = min(
        (v for v in verdicts if v.failure_class == failure_class),
        key=lambda v: v.reason in CONSEQUENCES,
    )
    for verdict in faults(d, verdicts, failure_class):
        d.record_failure(verdict)
    policy = d.spec.failure_policy
    if backoff.budget_exhausted(failure_class, d.status.restarts, policy):
        limit = getattr(
            policy, "max_restarts" if failure_class == "application" else "max_infra_restarts"
        )
        fail(
            d,
            ConditionReason.RESTART_BUDGET_EXHAUSTED,
            f"{backoff.budget_name(failure_class)} ({limit}) exhausted; last failure: "
            f"{cause.reason} of {cause.pod} ({failure_class})",
        )
        d.event(
            EventReason.BUDGET_EXHAUSTED,
            f"{backoff.budget_name(failure_class)} exhausted",
            "Warning",
        )
        return
    d.lose_work_since_checkpoint()
    d.count_restart(failure_class)
    d.status.consecutive_failures += 1
    d.status.recovering_since = d.status.recovering_since or d.now
    d.status.failed_at = d.status.failed_at or first_sign(d, verdicts)
    nodes = size or restart_size(d)
    d.start_epoch(nodes, reason=EpochReason.RESTART, exclude=gone)
    if gone:  # presumed gone machines cannot stop them gracefully, and the epoch waits for them
        d.delete_pods(sorted(gone), force=True)
    delay = backoff.restart_delay(failure_class, d.status.consecutive_failures, policy)
    if delay:
        d.status.current.restart_after = d.now + seconds(delay)
    d.set_condition(
        ConditionType.RUNNING, False, ConditionReason.RESTARTING, f"{cause.reason} of {cause.pod}"
    )
    d.set_condition(
        ConditionType.RESTARTING, True, cause.reason,
        f"{cause.reason} of {cause.pod}: epoch {d.status.epoch} with {nodes} nodes",
    )  # fmt: skip
    d.event(
        EventReason.RESTART,
        f"{failure_class} failure ({cause.reason} of {cause.pod}): epoch {d.status.epoch} "
        f"with {nodes} nodes" + (f" in {delay:.0f} s" if delay else ""),
        "Warning",
    )


def faults(d: Decision, verdicts: list[Verdict], failure_class: FailureClass) -> list[Verdict]:
    """The failures a restart records: the faults, not the failures that follow from them (one
    fault is one failure). Beside an infrastructure fault, application errors and collective
    failures are the peers' view of it (a plain script's surviving ranks exit 1 when a peer
    dies), while every infrastructure fault is one (two nodes lost together are two); among
    application errors alone, the first to happen stands for those its agents reported after
    it. Each kept fault says how many failures it stood for."""
    same = [v for v in verdicts if v.failure_class == failure_class]
    kept = [v for v in same if v.reason not in CONSEQUENCES] or same
    moments = _moments(d)
    if failure_class == "application" and len(kept) > 1 and all(v.pod in moments for v in kept):
        first = min(moments[v.pod] for v in kept if v.pod is not None)
        kept = [v for v in kept if moments[v.pod] == first]
    followed = len(verdicts) - len(kept)
    if not followed:
        return kept
    note = f"{followed} other rank failure{'s' if followed > 1 else ''} followed"
    return [replace(kept[0], message="; ".join(filter(None, [kept[0].message, note]))), *kept[1:]]


def _moments(d: Decision) -> dict[str | None, datetime]:
    """When each pod's workers failed, where its agent reported the moment."""
    return {
        p.name: p.agent.failed_at
        for p in d.observed.pods
        if p.agent is not None and p.agent.failed_at is not None
    }


def first_sign(d: Decision, verdicts: list[Verdict]) -> datetime | None:
    """When the earliest of these failures happened, where an agent reported the moment."""
    moments = _moments(d)
    return min((moments[v.pod] for v in verdicts if v.pod in moments), default=None)


def restart_size(d: Decision, unresponsive: frozenset[str] = frozenset()) -> int:
    """The size to restart at: the current one, less ranks whose machine is gone (or whose
    agent is presumed gone: `unresponsive`) unless hot spares stand in. One restart per failure:
    a shrink does not first wait for a replacement that cannot come (and the job grows back when
    capacity shows up)."""
    runnable = inplace.runnable_nodes(d.observed, d.status.epoch, d.status.nodes, unresponsive)
    return (
        elastic.largest_valid_size(d.spec, min(runnable, d.status.nodes))
        or elastic.largest_valid_size(d.spec, d.status.nodes)
        or elastic.target_size(d.spec)
    )


def fail(d: Decision, reason: ConditionReason, message: str) -> None:
    """The job ends Failed: its pods are stopped."""
    d.set_phase("Failed")
    d.status.completion_time = d.now
    d.set_condition(ConditionType.FAILED, True, reason, message)
    d.set_condition(ConditionType.RUNNING, False, reason)
    d.delete_pods([p.name for p in d.observed.pods if p.phase in ("Pending", "Running")])
    d.event(EventReason.FAILED, message, "Warning")
