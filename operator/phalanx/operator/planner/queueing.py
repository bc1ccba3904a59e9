"""Kueue: a TrainingJob labelled `kueue.x-k8s.io/queue-name` runs only what Kueue admitted.

Why a Workload of the operator's own: Kueue admits Workloads, and its built-in integrations
make one per job kind they know; for any other kind the job's controller makes it, as external
frameworks do. The job's Workload has one pod set, `node`, of `max + spares` pods shaped like
its node pod, with `minCount = min`: Kueue's partial admission may admit fewer, down to `min`.
No pod exists before the Workload is admitted; the job then runs at most the admitted pods,
node ranks first (at the largest valid size), hot spares from what is left.

Growing past a partial admission asks Kueue first: a second Workload for the job's whole size,
at least one valid size more than it runs (named for the epoch it was asked in). It waits in the
queue like any other; once Kueue admits it, it is the job's admission (the job grows into it by
its usual standby pods) and the first one is marked Finished, its quota handed back. Until then
both hold quota: Kueue must find room for the whole new size, not the difference (its elastic
workload slices, which count the difference, are alpha, off by default, and not used here).

An eviction (preempted by a higher-priority Workload, deactivated, a waitForPodsReady timeout)
is a checkpoint, not a failure: the pods are deleted gracefully (the agents pass SIGTERM on, and
`phalanx.resume` programs save the step they reached), the quota goes back to Kueue once they
are all gone (the contract between Kueue and a job's controller: the admission is cleared only
then), and the job waits Suspended until Kueue admits it again, to resume at the new size.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.models import labels
from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.events import EventReason
from phalanx.models.job import TrainingJob
from phalanx.models.names import workload_name
from phalanx.models.status import ENDED
from phalanx.operator.planner import elastic, refusal
from phalanx.operator.planner.actions import (
    EnsureWorkload,
    FinishWorkload,
    MarkPodsReady,
    ReleaseQuota,
)
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.decision import Decision
from phalanx.operator.planner.observed import Observed, WorkloadView

POLL_SECONDS = 2.0
"""How often an evicted job looks again while its pods stop (their deletions wake it too)."""


def queue_name(job: TrainingJob) -> str | None:
    """The Kueue LocalQueue the job names, if it names one."""
    return (job.metadata.labels or {}).get(labels.KUEUE_QUEUE) or None


@dataclass(frozen=True)
class Admission:
    """The job's Workloads sorted out (`sort_out`)."""

    current: WorkloadView | None
    """The one that admits the job: the newest holding quota, else the oldest not Finished."""
    growth: WorkloadView | None = None
    """One asked for later to grow, not admitted yet."""
    replaced: tuple[WorkloadView, ...] = ()
    """Older ones still holding quota: a newer admission replaces them."""


def sort_out(observed: Observed) -> Admission:
    """Which of the job's Workloads admits it, which asks to grow, which are replaced."""
    live = sorted((w for w in observed.workloads if not w.finished), key=lambda w: w.epoch)
    held = [w for w in live if w.quota_reserved]
    current = held[-1] if held else next(iter(live), None)
    if current is None:
        return Admission(None)
    growth = next((w for w in live if w.epoch > current.epoch and not w.quota_reserved), None)
    return Admission(current, growth, tuple(held[:-1]))


def admitted_sizes(job: TrainingJob, pods: int) -> tuple[int, int] | None:
    """Node pods and hot spares within `pods` admitted pods: the largest valid size first, the
    spares from what is left; None below the smallest valid size."""
    nodes = elastic.largest_valid_size(job.spec, pods)
    if nodes is None:
        return None
    return nodes, min(job.spec.spares, pods - nodes)


def as_admitted(job: TrainingJob, workload: WorkloadView | None) -> TrainingJob:
    """The job as the planner must run it: its desired size and spares within what Kueue
    admitted (unchanged where it is not queued or not admitted)."""
    if queue_name(job) is None or workload is None or workload.admitted is None:
        return job
    sizes = admitted_sizes(job, workload.admitted)
    if sizes is None:  # below minCount: Kueue does not admit that
        return job
    nodes, spares = sizes
    replicas = job.spec.replicas.model_copy(update={"desired": nodes})
    spec = job.spec.model_copy(update={"replicas": replicas, "spares": spares})
    return job.model_copy(update={"spec": spec})


def queued(d: Decision, config: PlannerConfig) -> bool:
    """Keep a queued job without pods until Kueue admits its Workload; stop it gracefully and
    hand the quota back when Kueue evicts it; mark the Workload Finished when the job ends."""
    queue = queue_name(d.job)
    if queue is None:
        return False
    if not d.observed.workloads_supported:
        message = (
            f"metadata.labels[{labels.KUEUE_QUEUE}] names the Kueue queue {queue}, but this "
            "cluster serves no Kueue Workloads (kueue.x-k8s.io): install Kueue, or remove the "
            "label to run the job without it"
        )
        if d.status.phase not in ENDED:
            d.set_condition(
                ConditionType.CONFIGURATION_ERROR, True, ConditionReason.KUEUE_NOT_SERVED, message
            )
            _hold(d, ConditionReason.KUEUE_NOT_SERVED, message)
        return True
    admission = sort_out(d.observed)
    workload = admission.current
    if d.status.phase in ENDED:
        for left in d.observed.workloads:  # every one still holding or asking for quota
            if not left.finished:
                d.actions.append(FinishWorkload(left.name, f"the TrainingJob {d.status.phase}"))
        return False
    _hand_back_replaced(d, admission)
    if workload is None:
        # ConfigurationError in the API server's words for this generation; a refusal of an
        # earlier one is cleared (the spec changed: the Workload is asked for again)
        refusal.refused(d, config)
        if _refused(d):
            _hold(d, ConditionReason.REFUSED_BY_API_SERVER, "the API server refused the job's "
                  "Workload: see the ConfigurationError condition", announce=False)  # fmt: skip
            return True
    active = not d.spec.suspend  # a suspended job's Workload is deactivated: its quota goes
    if workload is None or workload.active != active:
        spec, name = d.job.spec, workload.name if workload else workload_name(_name(d))
        epoch = workload.epoch if workload else 0
        count = spec.replicas.max + spec.spares
        d.actions.append(
            EnsureWorkload(name, count, spec.replicas.min, active, epoch, d.snapshot_bytes)
        )
    if workload is None:
        _hold(d, ConditionReason.WAITING_FOR_ADMISSION, f"waiting for Kueue queue {queue}")
        return True
    if workload.admitted is not None and workload.evicted is None:
        if d.status.phase == "Suspended" and not d.spec.suspend:
            d.event(EventReason.ADMITTED, _admitted_message(workload, workload.admitted))
        if d.spec.suspend and admission.growth is not None:
            d.actions.append(FinishWorkload(admission.growth.name, "the job is suspended"))
        return False
    if admission.growth is not None:
        d.actions.append(FinishWorkload(admission.growth.name, "the job stopped: it asks to "
                                        "grow again once admitted anew"))  # fmt: skip
    _stop_and_release(d, workload, queue)
    return True


def _name(d: Decision) -> str:
    return d.job.metadata.name or ""


def _hand_back_replaced(d: Decision, admission: Admission) -> None:
    """A Workload admitted for more pods replaces the older ones: their quota goes back (the
    job runs within the newer admission, its pods carried into it)."""
    current = admission.current
    if current is None or not admission.replaced:
        return
    for old in admission.replaced:
        d.actions.append(FinishWorkload(old.name, f"replaced by the Workload {current.name}"))
    if current.admitted is not None:
        d.event(EventReason.ADMITTED, f"Kueue admitted {current.admitted} pods to grow "
                f"(Workload {current.name}); the job grows into them")  # fmt: skip


def next_size(job: TrainingJob, nodes: int) -> int | None:
    """The smallest valid size above `nodes`, up to the size the job wants (its desired, max
    when unset); None when there is none."""
    spec = job.spec
    return next((n for n in range(nodes + 1, spec.desired_nodes + 1)
                 if elastic.is_valid_size(spec, n)), None)  # fmt: skip


def _ask_to_grow(
    d: Decision, wants: TrainingJob, current: WorkloadView, growth: WorkloadView | None
) -> None:
    """A running job admitted below the size it `wants` (the job as its spec says, not as
    admitted) asks Kueue, once, for the next valid size or more (a Workload of its own, see the
    module's doc)."""
    if d.spec.suspend or current.admitted is None or current.evicted is not None:
        return
    sizes = admitted_sizes(d.job, current.admitted)
    nodes = sizes[0] if sizes else 0
    wanted = next_size(wants, nodes)
    if growth is not None:
        if wanted is None:  # scaled down to what it holds: the request would hold idle quota
            d.actions.append(FinishWorkload(growth.name, "the job wants no more nodes"))
        return
    if wanted is None or d.status.phase != "Running" or d.status.nodes < nodes:
        return  # nothing to ask, not running, or still growing into this admission
    # the whole of what the job asks for, spares included (its admitted spec has fewer spares)
    epoch, count = d.status.epoch, current.requested or d.job.spec.replicas.max
    name = workload_name(_name(d), epoch)
    d.actions.append(EnsureWorkload(name, count, wanted, True, epoch, d.snapshot_bytes))
    d.event(EventReason.QUEUED, f"asks Kueue to grow from {nodes} nodes: the Workload {name}, "
            f"{count} pods, at least {wanted}")  # fmt: skip


def _admitted_message(workload: WorkloadView, pods: int) -> str:
    """What the admission means for the job's size: a partial one holds it there until Kueue
    admits the Workload it asks for to grow."""
    if workload.requested is None:
        return f"Kueue admitted {pods} pods"
    message = f"Kueue admitted {pods} of {workload.requested} pods"
    if pods < workload.requested:
        message += (
            ": the job runs within them, and asks Kueue for more with a Workload of its own "
            "once it runs"
        )
    return message


def report_to_kueue(d: Decision, wants: TrainingJob) -> None:
    """After the ladder decided: tell Kueue when the admitted job's node pods all run, and when
    they no longer do (a restart; Kueue's own WaitForStart stands until they first run); and
    once it runs below the size it `wants` (its own spec's), ask to grow."""
    admission = sort_out(d.observed)
    workload = admission.current
    if queue_name(d.job) is None or workload is None or workload.admitted is None:
        return
    _ask_to_grow(d, wants, workload, admission.growth)
    ready = d.status.phase == "Running" and workload.evicted is None
    if workload.pods_ready != ready and (ready or workload.pods_ready is not None):
        d.actions.append(MarkPodsReady(workload.name, ready))


def _refused(d: Decision) -> bool:
    """The API server refused the job's Workload for this spec (Kueue's webhook or its CRD's
    validation: a queue name that is no valid name, say): creating it again is futile until
    the spec changes."""
    report = d.observed.refused
    if report is not None and report.kind == "Workload" and report.generation == d.generation:
        return True
    current = d.condition(refusal.CONDITION)
    return (
        current is not None and current.status == "True" and current.reason == refusal.REASON
        and current.observed_generation == d.generation and " Workload " in current.message
    )  # fmt: skip


def _stop_and_release(d: Decision, workload: WorkloadView, queue: str) -> None:
    """Not admitted, or evicted: no pod runs. Pods still there stop gracefully (saving their
    step); once none is left, an evicted Workload's quota goes back to Kueue."""
    running = [p.name for p in d.observed.pods if not p.deleting]
    d.delete_pods(running)
    if workload.evicted is not None:
        if d.status.phase != "Suspended":
            d.event(EventReason.EVICTED, f"Kueue evicts the job ({workload.evicted}): "
                    "its ranks save their step and stop", "Warning")  # fmt: skip
        if d.observed.pods:
            d.requeue_in(POLL_SECONDS)
        elif workload.quota_reserved:
            d.actions.append(
                ReleaseQuota(workload.name, f"the TrainingJob stopped: {workload.evicted}")
            )
        message = f"evicted by Kueue ({workload.evicted}); waiting for queue {queue}"
        _hold(d, ConditionReason.EVICTED_BY_KUEUE, message, announce=False)
        return
    _hold(d, ConditionReason.WAITING_FOR_ADMISSION, f"waiting for Kueue queue {queue}")


def _hold(d: Decision, reason: ConditionReason, message: str, announce: bool = True) -> None:
    """The job waits without pods, Suspended (as Kueue's own jobs show it); `announce`: an event
    says so when it starts waiting."""
    if d.status.phase != "Suspended":
        d.status.active_seconds = d.active_seconds()
        if announce:
            d.event(EventReason.QUEUED, message)
    d.set_phase("Suspended")
    d.status.nodes = 0
    d.status.world_size = 0
    d.set_condition(ConditionType.SUSPENDED, True, reason, message)
    d.set_condition(ConditionType.RUNNING, False, reason)
