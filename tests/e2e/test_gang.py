"""`gang: true` on kind, scheduled by a gang scheduler: kube-scheduler v1.33 with a minimal
coscheduling plugin (TEST-ONLY, `tests/tools/gang-scheduler`: scheduler-plugins and Volcano are
not on the Go proxy here), reading scheduler-plugins' PodGroup API as Coscheduling does.

Covers: the scheduler is a real gang scheduler (a job of 4 node pods, each asking for 2 fake
GPUs, on 3 worker nodes: none of its pods is bound, where the default scheduler would bind 3;
the plugin rejects the 3 it held at Permit when its wait runs out); and the issue's case, a
pod deleted under a 3-node gang job: the replacement joins the job's one PodGroup, whose other
members are the carried-over pods already bound, so it schedules at once and the job trains past
epoch 1 (with a PodGroup per epoch, as before, it waited alone for a quorum of 3 that never came).
"""

from __future__ import annotations

import pytest

from tests.e2e.cluster import (
    KIND_SH,
    KindCluster,
    for_kind,
    record,
    run,
    wait_for,
)
from tests.e2e.jobs import training_job
from tests.e2e.training import replace_a_pod

SCHEDULER = "phalanx-gang"
PLUGIN = "PhalanxGang"
PODGROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@pytest.fixture(scope="module")
def gang_scheduler(kind: KindCluster, phalanx: str) -> KindCluster:
    """The gang scheduler and the PodGroup CRD on the cluster (the operator finds the CRD
    without a restart)."""
    run(["bash", str(KIND_SH), "gang-scheduler"], timeout=1500)
    return kind


def gang_job(name: str, *, nodes: tuple[int, int], steps: int) -> dict[str, object]:
    job = training_job(name, steps=steps, nodes=nodes,
                       failure_policy={"scheduleTimeoutSeconds": 600})  # fmt: skip
    job["spec"]["gang"] = True
    job["spec"]["schedulerName"] = SCHEDULER
    return for_kind(job)


def test_the_gang_scheduler_binds_no_pod_of_a_gang_that_cannot_all_fit(
    gang_scheduler: KindCluster, namespace: str
) -> None:
    kind = gang_scheduler
    kind.create_job(namespace, gang_job("toobig", nodes=(4, 4), steps=50))

    def rejected_at_permit() -> list[str] | None:
        events = kind.core.list_namespaced_event(
            namespace, field_selector="reason=FailedScheduling").items  # fmt: skip
        found = [str(e.message) for e in events if PLUGIN in str(e.message)
                 and str(e.involved_object.name).startswith("toobig-")]  # fmt: skip
        return found or None

    messages = wait_for(rejected_at_permit, 120, "a member held at Permit, then rejected")
    assert any("waiting" in m or "timeout" in m for m in messages), messages
    pods = kind.node_pods(namespace, "toobig")
    assert len(pods) == 4, [p.metadata.name for p in pods]
    assert all(p.metadata.labels.get(PODGROUP_LABEL) == "toobig" for p in pods)
    bound = [p.metadata.name for p in pods if p.spec.node_name]
    assert bound == [], f"a gang of 4 on 3 nodes bound {bound}"
    scheduled = kind.core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    assert [e.involved_object.name for e in scheduled] == []


def test_a_replacement_pod_joins_its_carried_over_peers_gang_past_epoch_one(
    gang_scheduler: KindCluster, namespace: str
) -> None:
    kind = gang_scheduler
    kind.create_job(namespace, gang_job("gang", nodes=(3, 3), steps=250))
    replaced = replace_a_pod(kind, namespace, "gang")
    pods = {p.metadata.name: p for p in kind.node_pods(namespace, "gang")
            if not p.metadata.deletion_timestamp}  # fmt: skip
    # the carried pods keep their first epoch's labels; the replacement is the one new pod
    [replacement] = [p for name, p in pods.items() if name not in replaced.carried]
    assert replacement.spec.scheduler_name == SCHEDULER
    assert replacement.metadata.labels[PODGROUP_LABEL] == "gang", "the job's one group"
    assert replacement.spec.node_name, "the replacement was bound"
    group = kind.custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "gang")  # fmt: skip
    assert group["spec"]["minMember"] == 3
    record("gang-pod-replaced",
           fault_to_first_step_s=round(replaced.first_step - replaced.deleted_at, 1),
           trained_epoch=replaced.epoch,
           failures=[f["reason"] for f in replaced.status.get("failures", [])],
           events=[e.reason for e in kind.events(namespace, "gang")])  # fmt: skip
