"""Planned disruptions: the cluster takes a node away (cordoned or drained, tainted NoExecute,
labelled unhealthy: `Observed.leaving`) while the job's ranks still run on it.

Why a step of its own, ahead of the failure rules: a drain is announced before it strikes. The
job stops the ranks on that node gracefully itself (its agent passes SIGTERM on; the workers of
`phalanx.resume` agree on the step's end, save it and stop, every rank alike), waits for the save,
and starts a new epoch without the node: a hot spare takes its rank, or the gang shrinks. The
epoch change is a planned resize, like a scale-down: no failure recorded, no restart budget
spent. The job's PodDisruptionBudget holds `kubectl drain`'s evictions off its node pods
meanwhile, so the eviction finds the rank already moved (see `builder.children`).
"""

from __future__ import annotations

from datetime import timedelta

from phalanx.models.conditions import ConditionType, EpochReason
from phalanx.models.events import EventReason
from phalanx.operator.planner import elastic, inplace
from phalanx.operator.planner.classify import Facts, classify
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.observed import PodView
from phalanx.operator.planner.recovery import CONSEQUENCES, workers_running

DEFAULT_GRACE_SECONDS = 30
"""Kubernetes' default termination grace: how long peers may go on saving once the moved pods
are gone (their own deadline went with them), so that peers that never stop cannot hold the
move forever."""


def drains(d: Decision, _: PlannerConfig) -> bool:
    """Move the epoch's ranks off nodes the cluster is taking away: stop their pods gracefully,
    wait for the gang's save, then a new epoch without them. A failure elsewhere in the gang
    (not a peer's reaction to the stop) is the failure rules' to handle: their restart leaves
    those nodes too, since no pod on them carries over."""
    if d.status.phase not in ("Running", "Pending", "Restarting") or not d.status.current.launched:
        return False
    d.delete_pods([
        p.name for p in d.observed.standby_pods(d.status.epoch)
        if d.observed.leaving(p) is not None and not p.deleting
    ])  # fmt: skip  # a spare there holds capacity that is going: `resize` makes another
    pods = d.observed.node_pods(d.status.epoch)
    moving = d.status.current.moving  # kept in status: a stopped pod may be gone at the next look
    newly = {
        p.name: p for p in pods.values()
        if d.observed.leaving(p) is not None and p.name not in moving
    }  # fmt: skip
    if not (moving or newly) or _another_failure(d, pods, {*moving, *newly}):
        return False
    if newly:
        for pod in newly.values():
            leaving = d.observed.leaving(pod)
            moving[pod.name] = f"node {pod.node_name} is {leaving}: node rank {pod.rank} leaves it"
        # with their grace: SIGTERM, save, stop
        d.delete_pods([p.name for p in newly.values() if not p.deleting])
        d.status.recovering_since = d.status.recovering_since or d.now
        why = "; ".join(moving.values())
        d.set_condition(ConditionType.RESIZING, True, EpochReason.DRAIN, f"{why} (saving first)")
    if _gang_still_saving(d, pods, [p for p in pods.values() if p.name in moving]):
        return True
    gone = frozenset(moving)
    why = "; ".join(moving.values())
    size = _size_without(d, gone)
    d.start_epoch(size, reason=EpochReason.DRAIN, exclude=gone)
    d.event(EventReason.DRAIN, f"{why}: epoch {d.status.epoch} with {size} nodes")
    return True


def _another_failure(d: Decision, pods: dict[int, PodView], names: set[str]) -> bool:
    """A pod off the leaving nodes failed for a reason of its own (a peer's collective failure
    or checkpointed stop is the gang reacting to the moving pods' stop)."""
    facts = Facts(d.observed.nodes, frozenset(d.spec.failure_policy.retryable_exit_codes))
    return any(
        (verdict := classify(p, facts)) is not None and verdict.reason not in CONSEQUENCES
        for p in pods.values()
        if p.name not in names
    )


def _gang_still_saving(d: Decision, pods: dict[int, PodView], moving: list[PodView]) -> bool:
    """The workers of the epoch still run, and the moving pods' grace has not run out: they are
    saving the step they reached (look again at the deadline; any pod's change wakes the loop
    sooner)."""
    working = workers_running(pods.values(), d.status.epoch)
    if not working:
        return False
    deadlines = [p.stop_deadline for p in moving if p.stop_deadline is not None]
    if not moving:  # gone already: their peers get a default grace from the stop to finish
        started = d.status.recovering_since or d.now
        deadlines = [started + timedelta(seconds=DEFAULT_GRACE_SECONDS)]
    elif not deadlines:  # asked this moment: the deletion shows at the pods' next event
        return True
    until = min(deadlines)
    if d.now >= until:
        return False
    d.requeue_at(until)
    return True


def _size_without(d: Decision, gone: frozenset[str]) -> int:
    """The new epoch's size: the ranks left and hot spares off the leaving nodes, at the
    largest valid size; where that is below the job's minimum, the current size (the missing
    ranks' pods wait for capacity: the node is going whatever the job's size)."""
    runnable = inplace.runnable_nodes(d.observed, d.status.epoch, d.status.nodes, gone)
    return elastic.largest_valid_size(d.spec, min(runnable, d.status.nodes)) or d.status.nodes
