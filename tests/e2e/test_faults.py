"""Real faults on real pods: the job closes ranks, resumes from a checkpoint with step > 0, grows
back when a lost node returns, and completes.

Each case measures the time from the fault to the first training step of the new epoch, from
the trainer's own step log (losses.jsonl on the shared volume; the containers share this
machine's clock), and records it with the job's events for the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from phalanx.models.names import standby_pod_name
from phalanx.operator.planner.timeline import PARTS
from tests.e2e import faults
from tests.e2e.cluster import (
    FAKE_GPUS_PER_NODE,
    KindCluster,
    first_step_after,
    for_kind,
    last_step_of,
    record,
    wait_for,
)
from tests.e2e.jobs import IMAGE, training_job
from tests.e2e.training import (
    JOB,
    records,
    resumes,
    step_log,
    trained_and_resumed,
    training,
    training_with_a_spare,
)

Inject = Callable[[KindCluster, k8s.V1Pod], None]
# Each case asserts the path it is named for. A surviving rank's collective can fail (exit 75)
# before the killed worker's agent reports the kill; the peers' collective failures then wait
# for the cause (recovery._awaits_peers), so the kill is what is recorded. A hung rank is found
# by its agent (a stopped worker, exit 79) long before any collective times out (300 s). A lost
# node is found by its peers' agents (its pings stop) long before its node turns NotReady: one
# restart.
CASES: dict[str, tuple[Inject, set[str]]] = {
    "worker-killed": (faults.kill_worker, {"Killed"}),
    "pod-deleted": (faults.delete_pod, {"PodDeleted"}),
    "node-lost": (faults.lose_node, {"PeerSilent"}),
    "rank-hung": (faults.hang_worker, {"Hang"}),
    # The failure policy's defaults: a stopped worker is its agent's to find (10 s), before the
    # adaptive step-hang timeout (max(30 s, 10 x the step time)) could fire.
    "rank-hung-default": (faults.hang_worker, {"Hang"}),
    # A rank that stalls while alive (no stopped process to see): only the step-hang timeout
    # finds it, at its default.
    "rank-stalled-default": (faults.stall_worker, {"Hang"}),
}


@pytest.mark.parametrize("case", CASES)
def test_a_fault_closes_ranks_resumes_from_a_checkpoint_and_completes(
    kind: KindCluster, namespace: str, case: str
) -> None:
    inject, reasons = CASES[case]
    node_lost = case == "node-lost"
    steps = 400 if node_lost else 150
    job = for_kind(training_job(JOB, steps=steps))
    if case.endswith("-default"):
        del job["spec"]["failurePolicy"]["hangTimeoutSeconds"]
    kind.create_job(namespace, job)
    log = step_log(kind, namespace)

    before = kind.wait_status(
        namespace, JOB, training(log, nodes=3), "training on 3 nodes, past a checkpoint",
        timeout=300,
    )  # fmt: skip
    epoch = before["epoch"]
    victim = kind.running_pod(namespace, JOB, epoch, rank=2)
    metrics_before = kind.operator_metrics()
    fault_at = time.time()
    inject(kind, victim)

    try:
        trained_epoch, first_step = wait_for(lambda: first_step_after(log, epoch), 300,
                                             "the first training step of a new epoch")  # fmt: skip
    finally:
        faults.release_stalls()
    after = kind.status(namespace, JOB)
    failure = next(f for f in after["failures"] if f["epoch"] == epoch)
    assert failure.get("class") == "infrastructure", failure
    assert failure.get("reason") in reasons, failure
    resumed = resumes(kind, namespace)[-1]
    assert isinstance(resumed["from"], int), resumed
    assert resumed["from"] > 0, resumed

    grown_at = None
    if node_lost:
        assert resumed["world"] == 2, f"expected the job to shrink to 2 nodes: {resumed}"
        kind.start_node(victim.spec.node_name)
        _, grown_at = wait_for(lambda: first_step_after(log, trained_epoch), 300,
                               "the first step after growing back")  # fmt: skip
        assert resumes(kind, namespace)[-1]["world"] == 3, "grown back to 3 nodes"

    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    assert done["progress"]["step"] == steps
    if not node_lost:  # (growing back is a second restart, of its own kind)
        if case == "rank-stalled-default":
            # No process to find: the operator counts from the step that last moved (the step
            # in flight can still finish after the stall), as its heartbeat showed it, to the
            # first step, as the heartbeat showed that; the report's lag is at both ends, so
            # the trainer's own times of the two steps measure it.
            measured = first_step - last_step_of(log, epoch)
            _metrics_tell_the_recovery(kind, namespace, metrics_before, done, measured, False)
        else:
            measured = first_step - fault_at
            _metrics_tell_the_recovery(kind, namespace, metrics_before, done, measured, True)
    reasons_seen = [e.reason for e in kind.events(namespace, JOB)]
    if node_lost:  # closing ranks is a restart at the size that runs (no Shrink event needed)
        assert "Grow" in reasons_seen, reasons_seen
        assert reasons_seen.count("Restart") == 1, f"one restart per lost node: {reasons_seen}"
    record(case, fault_to_decision_s=_decided(failure, fault_at),
           fault_to_first_step_s=round(first_step - fault_at, 1),
           resumed_from_step=resumed["from"], failure=failure.get("reason"),
           failures=[f.get("reason") for f in after["failures"] if f["epoch"] >= epoch],
           events=reasons_seen, grown_first_step_s=grown_at and round(grown_at - fault_at, 1))  # fmt: skip


def test_a_hot_spare_takes_a_lost_nodes_rank_in_place(kind: KindCluster, namespace: str) -> None:
    """spec.spares on a cluster: the standby pod runs the job's agent with torch imported; when
    a node is lost it takes that node's rank in place, so the job keeps its size (no shrink, no
    new pod to schedule) and resumes in seconds."""
    log, epoch, victim = training_with_a_spare(kind, namespace)
    fault_at = time.time()
    try:
        faults.lose_node(kind, victim)
        trained_epoch, first_step = wait_for(lambda: first_step_after(log, epoch), 300,
                                             "the first training step of a new epoch")  # fmt: skip
    finally:
        kind.start_node(victim.spec.node_name)
    after = kind.status(namespace, JOB)
    resumed = resumes(kind, namespace)[-1]
    assert resumed["world"] == 2, f"the spare kept the job at 2 nodes: {resumed}"
    assert resumed["from"] > 0, resumed
    spare = standby_pod_name(JOB, epoch, 0)
    assert after["current"]["ranks"].get(spare) == 1, f"the spare took rank 1: {after['current']}"
    reasons_seen = _completes_after_one_restart(kind, namespace, "one lost node")
    assert not {"Grow", "Shrink"} & set(reasons_seen), reasons_seen
    failure = next(f for f in after["failures"] if f["epoch"] == epoch)
    record("node-lost-spare", fault_to_decision_s=_decided(failure, fault_at),
           fault_to_first_step_s=round(first_step - fault_at, 1),
           resumed_from_step=resumed["from"], trained_epoch=trained_epoch,
           failures=[f.get("reason") for f in after["failures"] if f["epoch"] >= epoch],
           events=reasons_seen)  # fmt: skip


def test_a_silent_node_is_found_by_its_peers_and_its_rank_goes_to_the_spare_in_one_restart(
    kind: KindCluster, namespace: str
) -> None:
    """A machine that freezes (power loss, a stuck kernel): its container is paused, so its
    sockets stay open, its peers' collectives just wait and its kubelet stops posting. With the
    failure policy's defaults (no hangTimeoutSeconds), node rank 0's agent finds the frozen
    pod's pings gone (`phalanx.agent.peers`) and the job restarts once, without it, the spare
    taking its rank: detected as PeerSilent, not as a Hang, a collective's failure or the node's
    NotReady, whose time on this cluster is measured beside it."""
    log, epoch, victim = training_with_a_spare(kind, namespace, default_policy=True)
    node = victim.spec.node_name
    fault_at = time.time()
    kind.freeze_node(node)
    try:
        trained_epoch, first_step = wait_for(lambda: first_step_after(log, epoch), 120,
                                             "the first training step of a new epoch")  # fmt: skip
        not_ready_at = wait_for(lambda: time.time() if not kind.ready(node) else None, 180,
                                f"node {node} NotReady", interval=0.5)  # fmt: skip
    finally:
        kind.thaw_node(node)
    after = kind.status(namespace, JOB)
    failures = [f for f in after["failures"] if f["epoch"] >= epoch]
    assert [(f.get("reason"), f.get("pod")) for f in failures] == [
        ("PeerSilent", victim.metadata.name)
    ], failures
    spare = standby_pod_name(JOB, epoch, 0)
    assert after["current"]["ranks"].get(spare) == 1, f"the spare took rank 1: {after['current']}"
    assert victim.metadata.name not in after["current"]["ranks"], "the silent pod never rejoins"
    reasons_seen = _completes_after_one_restart(kind, namespace, "one silent node")
    record("silent-node-spare", fault_to_decision_s=_decided(failures[0], fault_at),
           fault_to_first_step_s=round(first_step - fault_at, 1),
           node_not_ready_s=round(not_ready_at - fault_at, 1), trained_epoch=trained_epoch,
           node_monitor_grace_s=kind.node_monitor_grace_seconds(),
           failures=[f.get("reason") for f in failures], events=reasons_seen)  # fmt: skip


def _metrics_tell_the_recovery(
    kind: KindCluster, namespace: str, before: dict[Any, float], done: dict[str, Any],
    measured: float, reported_once: bool,
) -> None:  # fmt: skip
    """The operator's metrics after one real recovery agree with the job's status and with the
    recovery this test measured: one infrastructure restart, the lost training seconds and the
    goodput of the status, its spares, and one observation of the recovery and of each part.
    `reported_once`: the operator's clock started at the failure itself, so its recovery ends
    a report later than the trainer's first step; else both its ends were seen a report late."""
    after = kind.operator_metrics()
    job = {("namespace", namespace), ("job", JOB)}

    def value(name: str, labels: set[tuple[str, str]], where: dict[Any, float]) -> float:
        return where.get((name, frozenset(labels)), 0.0)

    def grew(name: str, labels: set[tuple[str, str]]) -> float:
        return value(name, labels, after) - value(name, labels, before)

    infrastructure = job | {("class", "infrastructure")}
    assert value("phalanx_restarts_total", infrastructure, after) == done["restarts"]["total"] == 1
    assert value("phalanx_lost_training_seconds_total", job, after) == pytest.approx(
        done["lostSeconds"], abs=0.01
    )
    assert value("phalanx_goodput_ratio", job, after) == pytest.approx(done["goodput"], abs=1e-6)
    assert value("phalanx_spares", job, after) == done.get("spares", 0)
    assert grew("phalanx_recovery_seconds_count", {("class", "infrastructure")}) == 1
    observed = grew("phalanx_recovery_seconds_sum", {("class", "infrastructure")})
    # The operator's recovery ends when it sees the first step (its part "report"), this
    # test's when the trainer logged it.
    report = grew("phalanx_recovery_part_seconds_sum", {("part", "report")})
    expected = measured + (report if reported_once else 0.0)
    assert observed == pytest.approx(expected, abs=1.5), (observed, measured, report)
    parts = {p: grew("phalanx_recovery_part_seconds_count", {("part", p)}) for p in PARTS}
    assert parts == dict.fromkeys(PARTS, 1.0), parts


def test_a_partition_between_two_pods_is_found_by_their_agents_and_one_side_restarts(
    kind: KindCluster, namespace: str
) -> None:
    """Every packet between node ranks 0 and 1 dropped, both pods up and Ready: their
    collectives just wait, and rank 1's agent stops hearing rank 0's answers. The pod it accuses
    goes and the spare takes its rank in one restart: found as PeerSilent, not as a Hang or a
    collective's timeout (300 s). (Either side going heals a partition of two.)"""
    log, epoch, victim = training_with_a_spare(kind, namespace, default_policy=True)
    rank0 = kind.running_pod(namespace, JOB, epoch, rank=0)
    fault_at = time.time()
    kind.partition(rank0, victim)
    try:
        trained_epoch, first_step = wait_for(lambda: first_step_after(log, epoch), 120,
                                             "the first training step of a new epoch")  # fmt: skip
    finally:
        kind.partition(rank0, victim, heal=True)
    after = kind.status(namespace, JOB)
    failures = [f for f in after["failures"] if f["epoch"] >= epoch]
    sides = {rank0.metadata.name: 0, victim.metadata.name: 1}
    assert [f.get("reason") for f in failures] == ["PeerSilent"], failures
    gone = failures[0].get("pod")
    assert gone in sides, f"the accused pod is one of the two cut apart: {failures}"
    ranks = after["current"]["ranks"]
    assert ranks.get(standby_pod_name(JOB, epoch, 0)) == sides[gone], after["current"]
    assert gone not in ranks, "the pod that went never rejoins"
    reasons_seen = _completes_after_one_restart(kind, namespace, "one partition")
    record("partition-spare", fault_to_decision_s=_decided(failures[0], fault_at),
           fault_to_first_step_s=round(first_step - fault_at, 1), trained_epoch=trained_epoch,
           failures=[f.get("reason") for f in failures], events=reasons_seen)  # fmt: skip


def _completes_after_one_restart(kind: KindCluster, namespace: str, fault: str) -> list[str]:
    """The spare job of `_training_with_a_spare` trains all its steps, with one Restart event for
    `fault`; the job's event reasons."""
    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    assert done["progress"]["step"] == 250
    reasons_seen = [e.reason for e in kind.events(namespace, JOB)]
    assert reasons_seen.count("Restart") == 1, f"one restart for {fault}: {reasons_seen}"
    return reasons_seen


def _decided(failure: dict[str, Any], fault_at: float) -> float:
    """Seconds from the fault to the operator's decision (when it recorded the failure; the
    operator and this test share the machine's clock)."""
    return round(datetime.fromisoformat(failure["time"]).timestamp() - fault_at, 1)


PREEMPTOR_PRIORITY = "phalanx-e2e-preemptor"


def test_a_pod_preempted_by_the_scheduler_checkpoints_on_sigterm_and_redoes_no_step(
    kind: KindCluster, namespace: str
) -> None:
    """A real preemption: a pod of a higher PriorityClass asks for the GPUs of a node pod's
    node, and the scheduler evicts the node pod (graceful deletion: SIGTERM). The agent passes
    SIGTERM on, the workers agree on it at their next step, save a checkpoint of that step and
    stop; the job resumes from it. Found as the scheduler's preemption (DisruptionTarget), with
    zero steps redone."""
    kind.create_job(namespace, for_kind(training_job(JOB, steps=200, nodes=(3, 3))))
    log = step_log(kind, namespace)
    before = kind.wait_status(namespace, JOB, training(log, nodes=3),
                              "training on 3 nodes, past a checkpoint", timeout=300)  # fmt: skip
    epoch = before["epoch"]
    victim = kind.running_pod(namespace, JOB, epoch, rank=2)
    scheduling = k8s.SchedulingV1Api(kind.core.api_client)
    scheduling.create_priority_class(k8s.V1PriorityClass(
        metadata=k8s.V1ObjectMeta(name=PREEMPTOR_PRIORITY), value=1_000_000,
        description="phalanx e2e: preempts a node pod",
    ))  # fmt: skip
    preemptor = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="preemptor"),
        spec=k8s.V1PodSpec(
            priority_class_name=PREEMPTOR_PRIORITY, restart_policy="Never",
            node_selector={"kubernetes.io/hostname": str(victim.spec.node_name)},
            termination_grace_period_seconds=0,
            containers=[k8s.V1Container(
                name="hold", image=IMAGE, command=["sleep", "3600"],
                resources=k8s.V1ResourceRequirements(limits={"nvidia.com/gpu": FAKE_GPUS_PER_NODE}),
            )],
        ),
    )  # fmt: skip
    try:
        fault_at = time.time()
        kind.core.create_namespaced_pod(namespace, preemptor)
        wait_for(lambda: _gone(kind, victim), 120, "the node pod preempted")
        kind.core.delete_namespaced_pod("preemptor", namespace, grace_period_seconds=0)
        _, first_step = wait_for(lambda: first_step_after(log, epoch), 300,
                                 "the first training step of a new epoch")  # fmt: skip
    finally:
        scheduling.delete_priority_class(PREEMPTOR_PRIORITY)
    after = kind.status(namespace, JOB)
    failure = next(f for f in after["failures"] if f["epoch"] == epoch)
    assert (failure.get("class"), failure.get("reason")) == (
        "infrastructure",
        "PreemptionByScheduler",
    ), failure
    trained, resumed = trained_and_resumed(records(log), epoch)
    assert resumed == trained, f"resumed from step {resumed}, trained to {trained}: steps redone"
    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    assert done["progress"]["step"] == 200
    record("pod-preempted", fault_to_decision_s=_decided(failure, fault_at),
           fault_to_first_step_s=round(first_step - fault_at, 1),
           resumed_from_step=resumed, steps_redone=trained - resumed,
           failures=[f.get("reason") for f in after["failures"] if f["epoch"] >= epoch],
           events=[e.reason for e in kind.events(namespace, JOB)])  # fmt: skip


def _gone(kind: KindCluster, pod: k8s.V1Pod) -> bool:
    try:
        kind.core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    except k8s.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False
