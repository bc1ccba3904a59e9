"""Steps that change the gang's size: shrink to what schedules, follow `kubectl scale`, and grow
back (rate-limited) when standby pods show that capacity returned."""

from __future__ import annotations

from phalanx.models.conditions import ConditionReason, ConditionType, EpochReason
from phalanx.models.events import EventReason
from phalanx.operator.planner import elastic
from phalanx.operator.planner.actions import CreateStandbyPod
from phalanx.operator.planner.config import PlannerConfig, seconds
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.observed import PodView

SHRINK_REFUSED = ConditionReason.INSUFFICIENT_CAPACITY
"""Unschedulable's reason once scheduleTimeoutSeconds passed and too few pods could be placed."""
MAX_SCHEDULER_WORDS = 1024
"""At most this much of the scheduler's message goes into a condition (it lists every node)."""


def scheduler_reason(pending: list[PodView]) -> str:
    """The scheduler's own reason for the lowest-ranked pod it cannot place, and how many more."""
    first = min(pending, key=lambda p: p.rank)
    others = f" (and {len(pending) - 1} more pods)" if len(pending) > 1 else ""
    return f"pod {first.name}{others}: {first.unschedulable}"[:MAX_SCHEDULER_WORDS]


def unschedulable(d: Decision, _: PlannerConfig) -> bool:
    """The epoch's pods the scheduler cannot place: the Unschedulable condition gives its reason
    at once (a missing claim, too little nvidia.com/gpu, a taint), while `shrink` waits
    scheduleTimeoutSeconds before it acts; cleared once none is left unplaced."""
    pods = d.observed.node_pods(d.status.epoch).values()
    refused = [p for p in pods if not p.scheduled and p.unschedulable and not p.deleting]
    current = d.condition(ConditionType.UNSCHEDULABLE)
    if not refused:
        d.clear_condition(ConditionType.UNSCHEDULABLE, ConditionReason.SCHEDULED)
    elif current is None or current.status != "True" or current.reason != SHRINK_REFUSED:
        reason = ConditionReason.POD_UNSCHEDULABLE
        d.set_condition(ConditionType.UNSCHEDULABLE, True, reason, scheduler_reason(refused))
    return False


def shrink(d: Decision, _: PlannerConfig) -> bool:
    """Pods unschedulable for scheduleTimeoutSeconds since their creation: shrink to what did
    schedule."""
    pods = d.observed.node_pods(d.status.epoch)
    pending = [p for p in pods.values() if not p.scheduled]
    started = d.status.current.start_time
    if not pending or started is None or not d.status.current.launched:
        return False
    waiting_since = min((p.created or started for p in pending), default=started)
    due = waiting_since + seconds(d.spec.failure_policy.schedule_timeout_seconds)
    if d.now < due:
        d.requeue_at(due)
        return False
    scheduled = len(pods) - len(pending)
    nodes = elastic.largest_valid_size(d.spec, scheduled)
    if nodes is None:
        message = (
            f"only {scheduled} of {d.status.nodes} node pods could be scheduled; "
            f"{elastic.floor_reason(d.spec)}"
        )
        if refused := [p for p in pending if p.unschedulable]:
            message += f"; {scheduler_reason(refused)}"
        d.set_condition(ConditionType.UNSCHEDULABLE, True, SHRINK_REFUSED, message)
        return True
    d.status.recovering_since = d.status.recovering_since or started
    d.start_epoch(nodes, reason=EpochReason.SHRINK)
    timeout = d.spec.failure_policy.schedule_timeout_seconds
    d.event(
        EventReason.SHRINK,
        f"{len(pending)} pods unschedulable for {timeout} s: "
        f"epoch {d.status.epoch} with {nodes} nodes",
        "Warning",
    )
    return True


def runs_agents(d: Decision) -> bool:
    """The job's pods run phalanx-agent: one of the current epoch's reported as one. Only then
    can a standby pod run the template (its agent stands by); a cold standby made before the
    first report is replaced by a warm one."""
    return any(p.agent is not None for p in d.observed.node_pods(d.status.epoch).values())


def resize(d: Decision, config: PlannerConfig) -> bool:
    """Follow the desired size: shrink at once when scaled down; keep a standby pod per node
    the job lacks and per hot spare (spec.spares); grow when standbys schedule."""
    target = elastic.target_size(d.spec)
    current = d.status.nodes
    standbys = d.observed.standby_pods(d.status.epoch)
    if target < current:
        d.start_epoch(target, reason=EpochReason.SCALE)
        d.event(EventReason.SHRINK, f"scaled to {target} nodes: epoch {d.status.epoch}")
        return True
    running = d.status.phase == "Running" and not d.creation_refused
    wanted = (target - current if running else 0) + (0 if d.creation_refused else d.spec.spares)
    warm = runs_agents(d)
    d.delete_pods(
        [p.name for p in standbys if (p.rank >= wanted or (warm and not p.warm)) and not p.deleting]
    )
    have = {p.rank for p in standbys}
    avoid = tuple(d.status.avoid_nodes)
    if running:  # not while a restart's pods schedule: they come first
        missing = [i for i in range(wanted) if i not in have]
        snapshots = d.snapshot_bytes if missing else 0
        d.actions += [
            CreateStandbyPod(d.status.epoch, i, avoid, warm, target, snapshots) for i in missing
        ]
    ready = sum(1 for p in standbys if p.scheduled and p.rank < wanted)
    grown = elastic.largest_valid_size(d.spec, current + ready)
    if not ready or grown is None or grown <= current:
        return False
    running_since = d.status.current.running_time or d.now
    cooldown_end = running_since + seconds(config.grow_cooldown_seconds)
    if d.now < cooldown_end:
        d.requeue_at(cooldown_end)
        return False
    d.start_epoch(grown, reason=EpochReason.GROW)
    d.event(EventReason.GROW, f"capacity returned: epoch {d.status.epoch} with {grown} nodes")
    return True
