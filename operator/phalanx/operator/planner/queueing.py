"""Kueue: a TrainingJob labelled `kueue.x-k8s.io/queue-name` runs only what Kueue admitted.

Why a Workload of the operator's own: Kueue admits Workloads, and its built-in integrations
make one per job kind they know; for any other kind the job's controller makes it, as external
frameworks do. The job's Workload has one pod set, `node`, of `max + spares` pods shaped like
its node pod, with `minCount = min`: Kueue's partial admission may admit fewer, down to `min`.
No pod exists before the Workload is admitted; the job then runs at most the admitted pods,
node ranks first (at the largest valid size), hot spares from what is left, and never grows
past them.

An eviction (preempted by a higher-priority Workload, deactivated, a waitForPodsReady timeout)
is a checkpoint, not a failure: the pods are deleted gracefully (the agents pass SIGTERM on, and
`phalanx.resume` programs save the step they reached), the quota goes back to Kueue once they
are all gone (the contract between Kueue and a job's controller: the admission is cleared only
then), and the job waits Suspended until Kueue admits it again, to resume at the new size.
"""

from __future__ import annotations

from phalanx.models import labels
from phalanx.models.conditions import ConditionReason, ConditionType
from phalanx.models.events import EventReason
from phalanx.models.job import TrainingJob
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
from phalanx.operator.planner.observed import WorkloadView

POLL_SECONDS = 2.0
"""How often an evicted job looks again while its pods stop (their deletions wake it too)."""


def queue_name(job: TrainingJob) -> str | None:
    """The Kueue LocalQueue the job names, if it names one."""
    return (job.metadata.labels or {}).get(labels.KUEUE_QUEUE) or None


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
    workload = d.observed.workload
    if d.status.phase in ENDED:
        if workload is not None and not workload.finished:
            d.actions.append(FinishWorkload(f"the TrainingJob {d.status.phase}"))
        return False
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
        spec = d.job.spec
        d.actions.append(EnsureWorkload(spec.replicas.max + spec.spares, spec.replicas.min, active))
    if workload is None:
        _hold(d, ConditionReason.WAITING_FOR_ADMISSION, f"waiting for Kueue queue {queue}")
        return True
    if workload.admitted is not None and workload.evicted is None:
        if d.status.phase == "Suspended" and not d.spec.suspend:
            d.event(EventReason.ADMITTED, _admitted_message(workload, workload.admitted))
        return False
    _stop_and_release(d, workload, queue)
    return True


def _admitted_message(workload: WorkloadView, pods: int) -> str:
    """What the admission means for the job's size: a partial one holds it there (Kueue resizes
    no admitted Workload; its elastic workload slices are alpha and not used here)."""
    if workload.requested is None:
        return f"Kueue admitted {pods} pods"
    message = f"Kueue admitted {pods} of {workload.requested} pods"
    if pods < workload.requested:
        message += (
            ": the job runs within them and grows no further until Kueue admits it anew "
            "(after an eviction or a suspend)"
        )
    return message


def report_readiness(d: Decision) -> None:
    """After the ladder decided: tell Kueue when the admitted job's node pods all run, and when
    they no longer do (a restart). Kueue's own WaitForStart stands until they first run."""
    workload = d.observed.workload
    if queue_name(d.job) is None or workload is None or workload.admitted is None:
        return
    ready = d.status.phase == "Running" and workload.evicted is None
    if workload.pods_ready != ready and (ready or workload.pods_ready is not None):
        d.actions.append(MarkPodsReady(ready))


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
            d.actions.append(ReleaseQuota(f"the TrainingJob stopped: {workload.evicted}"))
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
