"""Steps for ranks that are alive but do not keep up: a step that no longer advances (a hang) and
a rank persistently slower than the others (a straggler). No process has failed, so nothing
reports a failure: the heartbeat's steps and step times are the evidence, and each ends in a
restart (`recovery.restart`) like any failure's.
"""

from __future__ import annotations

from phalanx.models.conditions import ConditionReason, ConditionType, FailureReason
from phalanx.models.events import EventReason
from phalanx.operator.planner import elastic, heartbeat, inplace
from phalanx.operator.planner.classify import Verdict
from phalanx.operator.planner.config import PlannerConfig, seconds
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.recovery import restart


def hang(d: Decision, config: PlannerConfig) -> bool:
    """A step that does not advance for the hang timeout (hangTimeoutSeconds, or adaptive to the
    step time) restarts the gang."""
    progress = d.status.progress
    if d.status.phase != "Running" or progress is None:
        return False
    timeout = peers_first(
        heartbeat.hang_timeout(d.spec.failure_policy.hang_timeout_seconds, progress.step_seconds),
        d, config,
    )  # fmt: skip
    due = heartbeat.hang_deadline(d.status, timeout.seconds)
    if due is None:
        return False
    beat = d.observed.heartbeat
    saving = heartbeat.save_deadline(beat, d.status.epoch, timeout.seconds)
    if saving is not None and saving > due:
        due = saving
    if d.now < due:
        d.requeue_at(due)
        return False
    if heartbeat.unheard_at(d.observed.heartbeat_renewed, due):
        # No renewal since before the deadline: the Lease is not being written (an API server
        # away, say), so a still step proves nothing. A frozen rank 0 is its peers' to find.
        d.requeue_at(d.now + seconds(heartbeat.UNHEARD_SECONDS))
        return False
    stalled = (d.now - progress.updated_at).total_seconds() if progress.updated_at else 0.0
    message = f"no progress for {stalled:.0f} s at step {progress.step} (timeout {timeout.why})"
    if saving is not None and beat is not None and beat.saving is not None:
        began = (d.now - beat.saving.since).total_seconds()
        message += f"; a save of step {beat.saving.step} blocking for {began:.0f} s"
    d.event(EventReason.HANG, message, "Warning")
    # The job stopped training when its step last moved, not when the timeout ran out: the
    # recovery (and the time lost) counts from there.
    d.status.failed_at = d.status.failed_at or progress.updated_at
    epoch = f"epoch {d.status.epoch}"
    restart(d, [Verdict("infrastructure", FailureReason.HANG, pod=epoch, message=message)])
    return True


def peers_first(
    timeout: heartbeat.Timeout, d: Decision, config: PlannerConfig, since_last_word: float = 0.0
) -> heartbeat.Timeout:
    """A frozen machine stalls every step and silences its agent's report too, and its peers'
    agents name it (`inplace.silent`). Where they watch each other, a shorter timeout is held to
    `PlannerConfig.peers_first_seconds` (plus `since_last_word`, for a clock that starts at a
    renewal up to that long before the freeze), so that the restart goes without the frozen pod
    (one restart), not with it, and again when it does not answer."""
    floor = config.peers_first_seconds + since_last_word
    if timeout.seconds >= floor or not inplace.watched(d.observed, d.status.epoch):
        return timeout
    return heartbeat.Timeout(floor, f"{timeout.why}, held to {floor:.0f} s for the peers' watch")


def stragglers(d: Decision, config: PlannerConfig) -> bool:
    """A rank persistently slower than stragglerFactor x median moves the gang off its node, at
    once: the new epoch runs on the pods and hot spares off the slow nodes (a shrink if no spare
    stands in; standbys kept off those nodes grow it back when capacity shows), with no wait for
    a replacement node that may not exist. Where what is left would be fewer than replicas.min,
    the job keeps the slow node: training slowly beats not training (a machine where every rank
    competes for the CPU makes healthy ranks look slow), and the SlowRanks condition says so."""
    beat = d.observed.heartbeat
    if d.status.phase != "Running" or beat is None or beat.epoch != d.status.epoch:
        return False
    ranks = heartbeat.straggler_ranks(
        beat, d.spec.failure_policy.straggler_factor, config.straggler_min_window,
        config.straggler_min_cost,
    )  # fmt: skip
    pods = d.observed.node_pods(d.status.epoch)
    by_name = {
        pod.name: pod for r in ranks if (pod := pods.get(r // d.spec.nproc_per_node)) is not None
    }
    slow = list(by_name.values())
    nodes = sorted({p.node_name for p in slow if p.node_name})
    if not nodes:
        d.clear_condition(ConditionType.SLOW_RANKS, ConditionReason.NO_SLOW_RANKS)
        return False
    avoid = frozenset({*d.status.avoid_nodes, *nodes})
    left = inplace.runnable_nodes(d.observed, d.status.epoch, d.status.nodes, avoid=avoid)
    size = elastic.largest_valid_size(d.spec, min(left, d.status.nodes))
    if size is None:
        _keep_slow_nodes(d, ranks, nodes, left)
        return False
    d.status.avoid_nodes = sorted(avoid)[-32:]
    d.event(EventReason.STRAGGLER, f"ranks {ranks} are slow; avoiding nodes {nodes}", "Warning")
    straggler = FailureReason.STRAGGLER
    verdicts = [Verdict("infrastructure", straggler, pod=p.name, node=p.node_name) for p in slow]
    restart(d, verdicts, size=size)
    return True


def _keep_slow_nodes(d: Decision, ranks: list[int], nodes: list[str], left: int) -> None:
    """Say once (the condition's transition) that slow ranks stay, and why."""
    message = (
        f"ranks {ranks} are slow, but leaving nodes {nodes} would leave {left} node pods, "
        f"too few ({elastic.floor_reason(d.spec)}): the job stays on them"
    )
    kept = d.condition(ConditionType.SLOW_RANKS)
    if kept is None or kept.status != "True":
        d.event(EventReason.STRAGGLER, message, "Warning")
    d.set_condition(ConditionType.SLOW_RANKS, True, ConditionReason.BELOW_MINIMUM, message)
