"""Kueue: a job labelled with a queue holds no pod until its Workload is admitted, runs within
the admitted pods (partial admission), stops gracefully when evicted and hands the quota back
once its pods are gone, and resumes at the size of its next admission."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phalanx.models import TrainingJob
from phalanx.models.conditions import ConditionType
from phalanx.operator.planner import (
    ChildRefusal,
    CreateNodePod,
    CreateStandbyPod,
    DeletePods,
    EnsureWorkload,
    FinishWorkload,
    MarkPodsReady,
    Observed,
    PodView,
    ReleaseQuota,
    WorkloadView,
)
from tests.unit.planner.builders import at, events, job, pods, step

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}


def queued(**spec: Any) -> TrainingJob:
    j = job(**spec)
    return j.model_copy(update={"metadata": j.metadata.model_copy(update={"labels": QUEUE})})


def kueue(*workloads: WorkloadView, **kw: Any) -> Observed:
    return Observed(workloads_supported=True, workloads=workloads, **kw)


def admitted(count: int) -> WorkloadView:
    return WorkloadView("j", admitted=count, requested=5, quota_reserved=True)


def test_no_pod_before_admission_and_the_workload_asks_for_max_plus_spares_down_to_min() -> None:
    j, plan = step(queued(spares=1), kueue(), at(0))
    assert plan.of_type(EnsureWorkload) == [EnsureWorkload("j", count=5, min_count=2, active=True)]
    assert plan.of_type(CreateNodePod) == []
    assert j.status is not None
    assert j.status.phase == "Suspended"
    suspended = next(c for c in j.status.conditions if c.type == ConditionType.SUSPENDED)
    assert (suspended.status, suspended.reason) == ("True", "WaitingForAdmission")
    assert events(plan) == ["Queued"]
    j, plan = step(j, kueue(WorkloadView("j")), at(5))
    assert plan.of_type(CreateNodePod) == []
    assert plan.of_type(EnsureWorkload) == [], "made once; Kueue has not admitted it yet"


def test_a_cluster_without_kueue_refuses_the_queue_label_by_name() -> None:
    j, plan = step(queued(), Observed(), at(0))
    assert j.status is not None
    error = next(c for c in j.status.conditions if c.type == ConditionType.CONFIGURATION_ERROR)
    assert error.reason == "KueueNotServed"
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in error.message
    assert plan.of_type(CreateNodePod) == []


def test_a_workload_the_api_server_refuses_is_a_configuration_error_not_a_retry() -> None:
    """Kueue's Workload CRD or webhook says no (a queue name that is no valid name): the job
    says so in the API server's words and asks no more until its spec changes."""
    j, _ = step(queued(), kueue(), at(0))
    words = 'Workload.kueue.x-k8s.io "j" is invalid: spec.queueName: Invalid value: "Team_A"'
    refused = ChildRefusal("Workload", "j", words, generation=j.metadata.generation)
    j, plan = step(j, kueue(refused=refused), at(1))
    assert j.status is not None
    error = next(c for c in j.status.conditions if c.type == ConditionType.CONFIGURATION_ERROR)
    assert (error.status, error.reason) == ("True", "RefusedByAPIServer")
    assert "spec.queueName" in error.message
    assert j.status.phase == "Suspended"
    assert plan.of_type(EnsureWorkload) == []
    assert "ConfigurationError" in events(plan)
    j, plan = step(j, kueue(), at(30))
    assert plan.of_type(EnsureWorkload) == [], "the status remembers: no retry for this spec"
    changed = j.model_copy(update={"metadata": j.metadata.model_copy(
        update={"generation": (j.metadata.generation or 0) + 1})})  # fmt: skip
    j, plan = step(changed, kueue(), at(40))
    assert len(plan.of_type(EnsureWorkload)) == 1, "a new spec tries again"
    assert j.status is not None
    error = next(c for c in j.status.conditions if c.type == ConditionType.CONFIGURATION_ERROR)
    assert error.status == "False"


def test_a_partial_admission_runs_at_the_admitted_size_and_asks_kueue_to_grow() -> None:
    j, _ = step(queued(spares=1), kueue(), at(0))
    j, plan = step(j, kueue(admitted(3)), at(10))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (1, 3)
    assert len(plan.of_type(CreateNodePod)) == 3
    assert "Admitted" in events(plan)
    [admission] = [e for e in plan.events if e.reason == "Admitted"]
    assert admission.message.startswith("Kueue admitted 3 of 5 pods: the job runs within them")
    assert plan.of_type(EnsureWorkload) == [], "no request to grow before it runs"
    assert plan.of_type(MarkPodsReady) == [], "not ready: Kueue's own WaitForStart stands"
    j, plan = step(j, kueue(admitted(3), pods=tuple(pods(1, 3))), at(20))
    assert j.status is not None
    assert j.status.phase == "Running"
    assert plan.of_type(CreateStandbyPod) == [], "3 admitted pods: no spare, no pod to grow"
    [grow] = plan.of_type(EnsureWorkload)
    assert grow == EnsureWorkload("j-grow-1", count=5, min_count=4, active=True, epoch=1), (
        "Running at 3 of max 4: asks Kueue, with a Workload of its own, for 4 nodes or more"
    )
    assert plan.of_type(MarkPodsReady) == [MarkPodsReady("j", True)]
    ready = replace(admitted(3), pods_ready=True)
    j, plan = step(j, kueue(ready, pods=tuple(pods(1, 3))), at(21))
    assert plan.of_type(MarkPodsReady) == [], "said once"
    lost = (*pods(1, 2), *pods(1, 3, phase="Failed")[2:])
    j, plan = step(j, kueue(ready, pods=lost), at(22))
    assert plan.of_type(MarkPodsReady) == [MarkPodsReady("j", False)], "restarting: not ready"


def test_an_admission_of_max_plus_spares_runs_max_nodes_and_the_spares() -> None:
    j, _ = step(queued(spares=1), kueue(), at(0))
    j, _ = step(j, kueue(admitted(5)), at(10))
    j, plan = step(j, kueue(admitted(5), pods=tuple(pods(1, 4))), at(20))
    assert j.status is not None
    assert j.status.nodes == 4
    assert len(plan.of_type(CreateStandbyPod)) == 1


def running_at(count: int, **spec: Any) -> tuple[TrainingJob, tuple[PodView, ...]]:
    """A queued job admitted at `count` pods and running them (epoch 1, at 20 s)."""
    j, _ = step(queued(**spec), kueue(), at(0))
    j, _ = step(j, kueue(admitted(count)), at(10))
    running = tuple(pods(1, count))
    j, _ = step(j, kueue(admitted(count), pods=running), at(20))
    return j, running


def test_an_eviction_stops_the_job_gracefully_then_hands_the_quota_back() -> None:
    j, running = running_at(4)
    evicted = replace(admitted(4), evicted="Preempted: preempted by team-a/urgent")
    j, plan = step(j, kueue(evicted, pods=running), at(30))
    assert plan.of_type(DeletePods) == [DeletePods(tuple(p.name for p in running), False)]
    assert plan.of_type(ReleaseQuota) == [], "not while its pods still save and stop"
    assert "Evicted" in events(plan)
    assert j.status is not None
    assert j.status.phase == "Suspended"
    stopping = tuple(replace(p, deleting=True) for p in running)
    j, plan = step(j, kueue(evicted, pods=stopping), at(31))
    assert plan.of_type(ReleaseQuota) == []
    j, plan = step(j, kueue(evicted), at(35))
    [release] = plan.of_type(ReleaseQuota)
    assert "Preempted" in release.message
    assert j.status is not None
    assert j.status.failures == []
    assert j.status.restarts.total == 0
    # Pending again, then admitted at 2: the job resumes (a new epoch) at that size
    j, plan = step(j, kueue(WorkloadView("j", evicted=evicted.evicted)), at(36))
    assert plan.of_type(ReleaseQuota) == [], "handed back once"
    j, plan = step(j, kueue(admitted(2)), at(100))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 2)
    assert j.status.start_time == at(100)


def test_a_suspended_job_deactivates_its_workload_and_a_finished_one_finishes_it() -> None:
    j, _ = step(queued(), kueue(), at(0))
    j = j.model_copy(update={"spec": j.spec.model_copy(update={"suspend": True})})
    _, plan = step(j, kueue(admitted(4)), at(10))
    assert plan.of_type(EnsureWorkload) == [EnsureWorkload("j", 4, 2, active=False)]
    assert j.status is not None
    done = j.model_copy(update={"status": j.status.model_copy(update={"phase": "Succeeded"})})
    _, plan = step(done, kueue(admitted(4)), at(20))
    assert [(a.name, a.message) for a in plan.of_type(FinishWorkload)] == [
        ("j", "the TrainingJob Succeeded")
    ]
    _, plan = step(done, kueue(replace(admitted(4), finished=True)), at(21))
    assert plan.of_type(FinishWorkload) == []


def growth(**kw: Any) -> WorkloadView:
    return WorkloadView("j-grow-1", requested=5, epoch=1, **kw)


def test_the_job_grows_only_once_kueue_admits_its_request_and_hands_the_first_back() -> None:
    """Partial admission at 2 of max 4: the request to grow waits in the queue while no pod is
    made for it; admitted at 4, the first Workload is Finished and the job grows into the new
    admission by its standby pods, then asks no more."""
    j, _ = step(queued(spares=1), kueue(), at(0))
    j, _ = step(j, kueue(admitted(2)), at(10))
    running = tuple(pods(1, 2))
    j, plan = step(j, kueue(admitted(2), pods=running), at(20))
    [asked] = plan.of_type(EnsureWorkload)
    assert (asked.name, asked.count, asked.min_count) == ("j-grow-1", 5, 3), "max + spares"
    assert "Queued" in events(plan)
    j, plan = step(j, kueue(admitted(2), growth(), pods=running), at(30))
    assert plan.of_type(EnsureWorkload) == [], "asked once"
    assert plan.of_type(CreateStandbyPod) == [], "no pod beyond the admitted 2"
    assert plan.of_type(FinishWorkload) == []
    grown = growth(admitted=5, quota_reserved=True)
    j, plan = step(j, kueue(admitted(2), grown, pods=running), at(40))
    assert plan.of_type(FinishWorkload) == [
        FinishWorkload("j", "replaced by the Workload j-grow-1")
    ], "the first admission's quota goes back once the larger one holds"
    assert "Admitted" in events(plan)
    assert len(plan.of_type(CreateStandbyPod)) == 3, "grows into the admission: 2 + a spare"
    assert plan.of_type(EnsureWorkload) == [], "no request while it grows into this one"
    first_done = replace(admitted(2), finished=True)
    standbys = tuple(
        replace(p, name=f"j-s-{p.rank}", role="standby", phase="Running") for p in pods(1, 2)
    )
    j, plan = step(j, kueue(first_done, grown, pods=(*running, *standbys)), at(200))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 4)
    assert "Grow" in events(plan)
    assert plan.of_type(FinishWorkload) == []
    assert plan.of_type(EnsureWorkload) == [], "at max: nothing more to ask"


def test_an_eviction_or_a_suspend_withdraws_the_request_to_grow() -> None:
    j, running = running_at(2)
    evicted = replace(admitted(2), evicted="Preempted: by team-a/urgent")
    _, plan = step(j, kueue(evicted, growth(), pods=running), at(30))
    assert FinishWorkload("j-grow-1", "the job stopped: it asks to grow again once admitted "
                          "anew") in plan.of_type(FinishWorkload)  # fmt: skip
    suspended = j.model_copy(update={"spec": j.spec.model_copy(update={"suspend": True})})
    _, plan = step(suspended, kueue(admitted(2), growth(), pods=running), at(30))
    assert FinishWorkload("j-grow-1", "the job is suspended") in plan.of_type(FinishWorkload)


def test_a_job_that_ends_finishes_every_workload_it_holds() -> None:
    j, _ = step(queued(), kueue(), at(0))
    assert j.status is not None
    done = j.model_copy(update={"status": j.status.model_copy(update={"phase": "Failed"})})
    _, plan = step(done, kueue(admitted(2), growth()), at(20))
    assert sorted(f.name for f in plan.of_type(FinishWorkload)) == ["j", "j-grow-1"]


def test_a_job_scaled_below_its_admission_asks_for_nothing_more() -> None:
    """`kubectl scale` to 2 of max 4, admitted at 4: the job runs at 2 and wants no more, so it
    asks Kueue for nothing (a request would hold quota it never uses)."""
    j, running = running_at(4, replicas={"min": 2, "max": 4, "desired": 2})
    assert j.status is not None
    assert j.status.nodes == 2
    _, plan = step(j, kueue(admitted(4), pods=running[:2]), at(30))
    assert plan.of_type(EnsureWorkload) == []
    _, plan = step(j, kueue(admitted(4), growth(), pods=running[:2]), at(31))
    assert plan.of_type(FinishWorkload) == [
        FinishWorkload("j-grow-1", "the job wants no more nodes")
    ], "a request left from before the scale-down is withdrawn"
    scaled_up = j.model_copy(update={"spec": j.spec.model_copy(update={
        "replicas": j.spec.replicas.model_copy(update={"desired": 4})})})  # fmt: skip
    _, plan = step(scaled_up, kueue(admitted(2), pods=running[:2]), at(40))
    [asked] = plan.of_type(EnsureWorkload)
    assert (asked.count, asked.min_count) == (5, 3), "scaled back up past its admission: asks"
