"""Planned disruptions on kind: `kubectl drain` of a node running a rank, with a hot spare; and a
job created suspended, whose deadline counts from its resume.

The drain cordons the node and asks to evict its pods; the job's PodDisruptionBudget refuses the
node pod's eviction (429), the operator sees the cordon, lets every rank save the step it
reached, hands the rank to the spare and deletes the pod itself; the drain's next try finds it
gone. Which comes first, the drain's eviction or the operator's delete, is a race (the API
server evicts a pod already being deleted without asking the budget): the test holds that the
eviction never struck the live pod, whichever won. A planned resize: no failure recorded, no
restart counted, no step redone.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.names import disruption_budget_name, standby_pod_name
from tests.e2e.cluster import (
    KindCluster,
    api_seconds,
    first_step_after,
    for_kind,
    record,
    wait_for,
)
from tests.e2e.jobs import training_job
from tests.e2e.pod_history import PodHistory
from tests.e2e.training import JOB, records, trained_and_resumed, training_with_a_spare

DISRUPTION_BUDGET_REFUSAL = "would violate the pod's disruption budget"
"""How the API server refuses an eviction the budget holds off (and `kubectl drain` reports it)."""


def test_a_drained_nodes_rank_moves_to_the_spare_before_its_pod_is_evicted(
    kind: KindCluster, namespace: str
) -> None:
    log, epoch, victim = training_with_a_spare(kind, namespace)
    node = str(victim.spec.node_name)
    assert DISRUPTION_BUDGET_REFUSAL in refused_eviction(kind, victim)
    history = PodHistory(kind.core, victim)
    history.start()
    drained_at = time.time()
    drain = kind.kubectl_popen(
        "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=240s"
    )
    try:
        trained_epoch, first_step = wait_for(lambda: first_step_after(log, epoch), 300,
                                             "the first training step of a new epoch")  # fmt: skip
        out, err = drain.communicate(timeout=240)
    finally:
        if drain.poll() is None:
            drain.kill()
        kind.kubectl("uncordon", node)
        history.stop()
    assert drain.returncode == 0, err[-4000:]
    assert history.deleted(), f"{victim.metadata.name} was never deleted"
    assert history.evicted_while_live() == [], (
        f"the drain evicted {victim.metadata.name} while it ran: {out[-2000:]} {err[-2000:]}"
    )
    after = kind.status(namespace, JOB)
    assert after["restarts"]["total"] == 0, after["restarts"]
    assert [f for f in after.get("failures", []) if f["epoch"] >= epoch] == []
    spare = standby_pod_name(JOB, epoch, 0)
    assert after["current"]["ranks"].get(spare) == 1, f"the spare took rank 1: {after['current']}"
    trained, resumed = trained_and_resumed(records(log), epoch)
    assert resumed == trained, f"resumed from step {resumed}, trained to {trained}: steps redone"
    reasons = [e.reason for e in kind.events(namespace, JOB)]
    assert reasons.count("Drain") == 1, reasons  # one planned resize
    budget = [e.reason for e in kind.events(namespace, disruption_budget_name(JOB))
              if e.involved_object.kind == "PodDisruptionBudget" and e.type == "Warning"]  # fmt: skip
    assert budget == [], f"the disruption controller warned about the budget: {budget}"
    assert "Restart" not in reasons, reasons
    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    assert done["progress"]["step"] == 250
    record("node-drained-spare", fault_to_first_step_s=round(first_step - drained_at, 1),
           resumed_from_step=resumed, steps_redone=trained - resumed,
           trained_epoch=trained_epoch, failures=[], events=reasons,
           drain_met_the_budget=DISRUPTION_BUDGET_REFUSAL in err + out)  # fmt: skip


def refused_eviction(kind: KindCluster, pod: k8s.V1Pod) -> str:
    """What the API server answers a dry-run eviction of `pod`: the budget's refusal (429)."""
    meta = k8s.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
    eviction = k8s.V1Eviction(metadata=meta, delete_options=k8s.V1DeleteOptions(dry_run=["All"]))
    with pytest.raises(ApiException) as refused:
        kind.core.create_namespaced_pod_eviction(meta.name, meta.namespace, eviction)
    assert refused.value.status == 429, refused.value
    return str(refused.value.body)


def test_a_job_created_suspended_fails_at_its_deadline_counted_from_its_resume(
    kind: KindCluster, namespace: str
) -> None:
    """The batch Job's rule: the deadline counts from the (last) resume, time suspended never."""
    job = for_kind(training_job("late", steps=100_000, nodes=(2, 2)))
    job["spec"]["suspend"] = True
    job["spec"]["activeDeadlineSeconds"] = 40
    kind.create_job(namespace, job)
    waiting = kind.wait_status(namespace, "late", lambda s: s.get("phase") == "Suspended",
                               "Suspended from creation", timeout=120)  # fmt: skip
    assert "startTime" not in waiting, waiting
    past_deadline = time.time() + 45
    while time.time() < past_deadline:  # suspended past the deadline on purpose: it must not count
        status = kind.status(namespace, "late")
        assert status["phase"] == "Suspended", f"the clock ran while suspended: {status}"
        assert "startTime" not in status, status
        assert kind.node_pods(namespace, "late") == []
        time.sleep(3)
    resumed_at = time.time()
    kind.custom.patch_namespaced_custom_object(
        "phalanx.dev", "v1alpha1", namespace, "trainingjobs", "late", {"spec": {"suspend": False}})  # fmt: skip
    running = kind.wait_status(namespace, "late", lambda s: s.get("phase") == "Running",
                               "Running once resumed", timeout=300)  # fmt: skip
    started = api_seconds(running["startTime"])
    assert started >= resumed_at - 1, "startTime is the resume, not the creation"
    failed = kind.wait_status(namespace, "late", lambda s: s.get("phase") == "Failed",
                              "Failed at the deadline", timeout=300)  # fmt: skip
    reasons = {c["type"]: c.get("reason") for c in failed["conditions"] if c["status"] == "True"}
    assert reasons.get("Failed") == "DeadlineExceeded", failed["conditions"]
    ended = api_seconds(failed["completionTime"])
    assert 40 <= ended - started < 70, f"failed {ended - started:.0f} s after its start"
