"""`plan(job, observed, now)`: the operator's reconcile as a ladder of short-circuits.

Each step is a small function with a one-line docstring. It reads the job and the snapshot, adds
to the `Decision`, and returns True when the ladder stops there. The order is the policy:
finished jobs and suspension first, then the epoch's lifecycle (retire the old, launch the new,
unless the API server refused the spec's objects), then failures, success, hangs, stragglers, and
only then resizing. A decision that would pass the last epoch pod names can hold fails the job.
"""

from __future__ import annotations

from datetime import datetime

from phalanx.models.conditions import ConditionReason, ConditionType, EpochReason
from phalanx.models.events import EventReason
from phalanx.models.job import TrainingJob
from phalanx.models.names import MAX_EPOCH, node_pod_name
from phalanx.models.status import ENDED, TrainingJobStatus
from phalanx.operator.planner import (
    disruption,
    elastic,
    inplace,
    lifecycle,
    memory,
    queueing,
    startup,
)
from phalanx.operator.planner.actions import (
    AssignEpoch,
    CreateNodePod,
    DeleteJob,
    EnsureChildren,
    EnsurePodGroup,
    Plan,
)
from phalanx.operator.planner.config import PlannerConfig, Step
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.observed import Observed
from phalanx.operator.planner.progress import ended_unreported, track_progress
from phalanx.operator.planner.recovery import fail, failures
from phalanx.operator.planner.refusal import refused
from phalanx.operator.planner.sizing import resize, shrink, unschedulable
from phalanx.operator.planner.stalls import hang, stragglers


def plan(
    job: TrainingJob, observed: Observed, now: datetime, config: PlannerConfig | None = None
) -> Plan:
    """Decide what to do about `job` given what is observed at `now`. Pure."""
    config = config or PlannerConfig()
    previous = job.status
    decision = _fresh(job, observed, now)
    epoch = decision.status.epoch
    stopped_at = next((i for i, step in enumerate(LADDER) if step(decision, config)), None)
    if decision.status.epoch > MAX_EPOCH:
        decision = _fresh(job, observed, now)
        epoch_limit_reached(decision)
    publish_assignment(decision)
    if epoch < decision.status.epoch and (stopped_at or 0) > LADDER.index(launch):
        launch_at_once(decision, observed, config)
    count_spares(decision)
    queueing.report_to_kueue(decision, job)
    return decision.to_plan(previous)


def _fresh(job: TrainingJob, observed: Observed, now: datetime) -> Decision:
    """The decision's starting point. Where the spec gives no GPU memory, the job is decided
    with its nodes' (`memory.with_node_gpu_memory`); a queued job, within what Kueue admitted
    (`queueing.as_admitted`)."""
    status = job.status.model_copy(deep=True) if job.status else TrainingJobStatus()
    seen = inplace.effective(observed, status.epoch, status.nodes, status.current)
    sized = memory.with_node_gpu_memory(job, observed.nodes.values())
    admitted = queueing.as_admitted(sized, queueing.sort_out(observed).current)
    return Decision(job=admitted, observed=seen, now=now, status=status)


def launch_at_once(d: Decision, observed: Observed, config: PlannerConfig) -> None:
    """A new epoch decided past the ladder's launch step (a restart, a resize) launches in the
    same reconcile, after its assignment, unless an old pod's graceful stop must be awaited
    (`retire_previous_epoch`): its pods are created now, not a reconcile later. Why: under a
    storm that later reconcile came seconds after the decision (its own queue, then the retire
    step found nothing to wait for), when the pods of lost nodes, the only ones retired, were
    already deleted by force (docs/figures.md, "Storms"). The view is the new epoch's (its
    carried-over pods at their new ranks), as the next reconcile's would be."""
    if d.status.phase in ENDED:
        return
    d.observed = inplace.effective(observed, d.status.epoch, d.status.nodes, d.status.current)
    stale = d.observed.stale_pods(d.status.epoch)
    if any(p.role == "node" and not d.observed.on_lost_node(p) for p in stale):
        return
    if not refused(d, config):
        launch(d, config)


def publish_assignment(d: Decision) -> None:
    """Until the epoch launched (and after its backoff), publish who runs it: carried-over pods
    start it at once, even while replaced pods still terminate or new ones schedule."""
    current = d.status.current
    if d.status.phase in ENDED or d.spec.suspend or d.status.epoch == 0 or current.launched:
        return
    if current.restart_after and d.now < current.restart_after:
        return
    name = d.job.metadata.name or ""
    by_rank = {rank: pod for pod, rank in current.ranks.items()}
    ranks = tuple(
        (by_rank.get(rank, node_pod_name(name, d.status.epoch, rank)), rank)
        for rank in range(d.status.nodes)
    )
    d.actions.append(AssignEpoch(d.status.epoch, d.status.nodes, ranks))


def count_spares(d: Decision) -> None:
    """Hot spares ready now: standby pods whose agent stands by warm."""
    d.status.spares = sum(
        1 for p in d.observed.standby_pods(d.status.epoch) if p.reusable and not p.deleting
    )


def epoch_limit_reached(d: Decision) -> None:
    """Instead of an epoch past MAX_EPOCH, whose pod hostnames might not fit, the job fails."""
    fail(
        d,
        ConditionReason.EPOCH_LIMIT_REACHED,
        f"the job reached epoch {MAX_EPOCH}, the last one its pod hostnames "
        "<name>-<epoch>-<rank> can hold; create it again to go on from its last checkpoint",
    )


def finished(d: Decision, _: PlannerConfig) -> bool:
    """A Succeeded or Failed job only stops leftover pods and waits for its TTL."""
    if d.status.phase not in ENDED:
        return False
    d.delete_pods(
        [p.name for p in d.observed.pods if p.phase in ("Pending", "Running") and not p.deleting]
    )
    expiry = lifecycle.ttl_expiry(d.spec, d.status)
    if expiry is not None:
        if d.now >= expiry:
            d.actions.append(DeleteJob())
        else:
            d.requeue_at(expiry)
    return True


def suspended(d: Decision, _: PlannerConfig) -> bool:
    """Suspend deletes every pod; resuming starts a new epoch from the last checkpoint. As for a
    batch Job, resuming resets the start time, so activeDeadlineSeconds counts from the last
    resume; a job created suspended starts its clock when first resumed."""
    if d.spec.suspend:
        d.delete_pods([p.name for p in d.observed.pods if not p.deleting])
        if d.status.phase != "Suspended":
            d.event(EventReason.SUSPENDED, "job suspended: all pods deleted")
            d.status.active_seconds = d.active_seconds()
        d.set_phase("Suspended")
        d.status.nodes = 0
        d.status.world_size = 0
        d.set_condition(
            ConditionType.SUSPENDED, True, ConditionReason.SUSPENDED, "spec.suspend is true"
        )
        d.set_condition(ConditionType.RUNNING, False, ConditionReason.SUSPENDED)
        return True
    if d.status.phase == "Suspended":
        d.set_condition(ConditionType.SUSPENDED, False, ConditionReason.RESUMED)
        d.status.start_time = d.now  # the batch Job's rule: the active deadline counts anew
        if d.status.epoch == 0:  # created suspended, or queued: its first epoch starts now
            d.set_phase("Pending")
            return False
        d.start_epoch(elastic.target_size(d.spec), reason=EpochReason.RESUMED)
        d.event(
            EventReason.RESUMED, f"job resumed: epoch {d.status.epoch} with {d.status.nodes} nodes"
        )
    return False


def deadline_exceeded(d: Decision, _: PlannerConfig) -> bool:
    """Past activeDeadlineSeconds the job fails."""
    due = lifecycle.deadline(d.spec, d.status)
    if due is None:
        return False
    if d.now < due:
        d.requeue_at(due)
        return False
    fail(
        d,
        ConditionReason.DEADLINE_EXCEEDED,
        f"job was active longer than {d.spec.active_deadline_seconds} s",
    )
    return True


def excluded_namespace(d: Decision, config: PlannerConfig) -> bool:
    """A job in a namespace the operator may not touch (kube-system and the like, on a
    cluster-wide install) fails at once, saying which setting excludes it, and gets nothing."""
    namespace = d.job.metadata.namespace or ""
    if namespace not in config.excluded_namespaces:
        return False
    fail(
        d,
        ConditionReason.NAMESPACE_EXCLUDED,
        f"namespace {namespace} is excluded: the operator runs no TrainingJob there (the chart's "
        "operator.excludedNamespaces, PHALANX_OPERATOR_EXCLUDED_NAMESPACES); create it in "
        "another namespace",
    )
    return True


def does_not_fit(d: Decision, _: PlannerConfig) -> bool:
    """A job that fits in GPU memory at no size in min..max, or whose pods' own /dev/shm cannot
    hold its memory snapshots, fails at once, not in an OOM or eviction loop."""
    host = memory.snapshots_do_not_fit(d.spec)
    if memory.floor(d.spec) is not None and host is None:
        return False
    fail(d, ConditionReason.DOES_NOT_FIT_IN_MEMORY, host or memory.why_not(d.spec))
    return True


def first_epoch(d: Decision, _: PlannerConfig) -> bool:
    """A new job (or one whose pods are ahead of its status) gets its epoch."""
    newest = d.observed.newest_epoch()
    if newest > d.status.epoch:  # pods created, status write lost: adopt their epoch and size
        d.status.epoch = newest
        sizes = [p.epoch_nodes for p in d.observed.node_pods(newest).values() if p.epoch_nodes]
        if sizes:
            d.status.nodes = sizes[0]
            d.status.world_size = sizes[0] * d.spec.nproc_per_node
    if d.status.epoch == 0:
        d.status.start_time = d.status.start_time or d.now
        d.start_epoch(elastic.target_size(d.spec), reason=EpochReason.CREATED)
        d.set_condition(ConditionType.RUNNING, False, ConditionReason.STARTING)
        d.event(
            EventReason.STARTED,
            f"epoch 1 with {d.status.nodes} nodes (world size {d.status.world_size})",
        )
    return False


def retire_previous_epoch(d: Decision, config: PlannerConfig) -> bool:
    """Old epochs' pods are deleted, and the new epoch waits until they are gone.

    Pods on a lost (NotReady) node are deleted at once and not waited for: their kubelet cannot
    confirm a graceful deletion, so they would stay Terminating until the node returned. Should
    the node only be cut off, its stale ranks cannot join the new epoch, which rendezvouses at a
    new rank 0 (a new MASTER_ADDR), and their collectives fail without their peers."""
    stale = d.observed.stale_pods(d.status.epoch)
    if not stale:
        return False
    lost = [p for p in stale if d.observed.on_lost_node(p)]
    d.delete_pods([p.name for p in stale if not p.deleting and p not in lost])
    d.delete_pods([p.name for p in lost], force=True)
    if any(p.role == "node" and p not in lost for p in stale):
        d.set_phase("Restarting")
        d.requeue_in(config.retire_poll_seconds)
        return True
    return False


def launch(d: Decision, _: PlannerConfig) -> bool:
    """Create the epoch's missing node pods (after any backoff) until all were seen created."""
    current = d.status.current
    if current.launched:
        return False
    if current.restart_after and d.now < current.restart_after:
        d.set_phase("Restarting")
        d.requeue_at(current.restart_after)
        return True
    pods = d.observed.node_pods(d.status.epoch)
    if len(pods) >= d.status.nodes:
        if current.restart_after is not None:
            # Every pod carried over in place, after a backoff: this is the first look at which
            # the assignment may go out, and once launched it would never be published.
            publish_assignment(d)
        current.launched = True
        return False
    d.actions.append(EnsureChildren(d.status.epoch))
    if d.spec.gang and d.observed.podgroups_supported:
        d.actions.append(EnsurePodGroup(min_member=d.status.nodes))
    elif d.spec.gang and not pods:  # once per epoch: its first pods are created now
        d.event(
            EventReason.GANG_SCHEDULING_UNAVAILABLE,
            "spec.gang is set but this cluster serves no PodGroup (scheduling.x-k8s.io): "
            "the epoch's pods are scheduled one by one",
            "Warning",
        )
    avoid = tuple(d.status.avoid_nodes)
    master = next((pod for pod, rank in current.ranks.items() if rank == 0), None)
    missing = [rank for rank in range(d.status.nodes) if rank not in pods]
    snapshots = d.snapshot_bytes if missing else 0
    epoch, nodes, agent = d.status.epoch, d.status.nodes, d.agent_allowed
    d.actions += [
        CreateNodePod(epoch, rank, nodes, avoid, master, agent, snapshots) for rank in missing
    ]
    return False


def success(d: Decision, _: PlannerConfig) -> bool:
    """All node ranks exited 0: the job Succeeded."""
    pods = d.observed.node_pods(d.status.epoch)
    if not lifecycle.succeeded(pods, d.status.nodes):
        return False
    d.set_phase("Succeeded")
    progress = d.status.progress
    if progress is None:
        ended_unreported(d)
    else:  # a resumed epoch with no step left to train
        d.finish_recovery(progress.step)
    d.status.completion_time = d.now
    d.set_condition(
        ConditionType.SUCCEEDED, True, ConditionReason.ALL_RANKS_SUCCEEDED,
        f"all {d.status.nodes} node pods exited 0",
    )  # fmt: skip
    d.set_condition(ConditionType.RUNNING, False, ConditionReason.SUCCEEDED)
    d.delete_pods([p.name for p in d.observed.pods if p.role == "standby"])
    d.event(
        EventReason.SUCCEEDED, f"all {d.status.nodes} node pods exited 0 in epoch {d.status.epoch}"
    )
    if (expiry := lifecycle.ttl_expiry(d.spec, d.status)) is not None:
        d.requeue_at(expiry)
    return True


LADDER: tuple[Step, ...] = (
    queueing.queued,
    finished,
    suspended,
    excluded_namespace,
    deadline_exceeded,
    does_not_fit,
    first_epoch,
    retire_previous_epoch,
    refused,
    launch,
    disruption.drains,
    failures,
    success,
    track_progress,
    startup.frozen_agents,
    startup.stuck_startup,
    hang,
    stragglers,
    unschedulable,
    shrink,
    resize,
)

__all__ = ["Observed", "PlannerConfig", "Step", "plan"]
