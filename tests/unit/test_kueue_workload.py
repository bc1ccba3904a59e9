"""A queued job's Kueue Workload, built and read back: one pod set shaped like the node pod
(Kueue counts what the pods really request), partial admission down to min, the queue and the
priority; and what the planner reads of Kueue's decision."""

from __future__ import annotations

from typing import Any

from phalanx.models import TrainingJob
from phalanx.operator import observe
from phalanx.operator.builder import node_pod
from phalanx.operator.builder.env import BuildSettings
from phalanx.operator.builder.workload import workload
from tests.unit.planner.builders import job


def queued(**spec: Any) -> TrainingJob:
    j = job(**spec)
    labels = {"kueue.x-k8s.io/queue-name": "team-a"}
    return j.model_copy(update={"metadata": j.metadata.model_copy(update={"labels": labels})})


def test_the_workload_is_one_pod_set_shaped_like_the_node_pod() -> None:
    j = queued(template={"spec": {"containers": [{
        "name": "t", "image": "img", "resources": {"requests": {"cpu": "3", "memory": "8Gi"}},
    }]}})  # fmt: skip
    settings = BuildSettings()
    built = workload(j, 5, 2, True, settings)
    assert built["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert built["metadata"]["ownerReferences"][0]["kind"] == "TrainingJob"
    assert built["spec"]["queueName"] == "team-a"
    assert built["spec"]["active"] is True
    [pod_set] = built["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"], pod_set["minCount"]) == ("node", 5, 2)
    pod = node_pod(j, 1, 0, 5, settings)
    assert (
        pod_set["template"]["spec"]["containers"][0]["resources"]
        == (pod["spec"]["containers"][0]["resources"])
    )
    assert "priorityClassRef" not in built["spec"]
    assert "minCount" not in workload(j, 2, 2, True, settings)["spec"]["podSets"][0]


def test_a_priority_class_travels_with_its_value() -> None:
    j = queued(priorityClassName="urgent")
    spec = workload(j, 4, 2, False, BuildSettings(), priority=1000)["spec"]
    assert spec["priorityClassRef"] == {
        "group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "urgent",
    }  # fmt: skip
    assert (spec["priority"], spec["active"]) == (1000, False)


def body(status: dict[str, Any], active: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "j"},
        "spec": {"active": active, "podSets": [{"name": "node", "count": 5}]},
        "status": status,
    }


def cond(kind: str, value: str, reason: str = "R", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": value, "reason": reason, "message": message}


def test_what_the_planner_reads_of_kueues_decision() -> None:
    pending = observe.workload_view(body({}))
    assert (pending.admitted, pending.evicted, pending.quota_reserved) == (None, None, False)
    partial = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "node", "count": 3}]},
               "conditions": [cond("QuotaReserved", "True"), cond("Admitted", "True")]}  # fmt: skip
    assert observe.workload_view(body(partial)).admitted == 3
    assert observe.workload_view(body(partial)).requested == 5, "what it asked for"
    whole = {"admission": {"podSetAssignments": [{"name": "node"}]},
             "conditions": [cond("Admitted", "True")]}  # fmt: skip
    assert observe.workload_view(body(whole)).admitted == 5, "no count: the spec's"
    reserved_only = {**partial, "conditions": [cond("QuotaReserved", "True")]}
    assert observe.workload_view(body(reserved_only)).admitted is None, "admission checks pending"
    evicted = {**partial, "conditions": [*partial["conditions"],
                                         cond("Evicted", "True", "Preempted", "by team-a/urgent")]}  # fmt: skip
    view = observe.workload_view(body(evicted))
    assert (view.evicted, view.quota_reserved) == ("Preempted: by team-a/urgent", True)
    finished = observe.workload_view(body({"conditions": [cond("Finished", "True")]}, False))
    assert (finished.finished, finished.active, finished.pods_ready) == (True, False, None)
    ready = observe.workload_view(body({"conditions": [cond("PodsReady", "False")]}))
    assert ready.pods_ready is False


def test_a_workload_asked_for_to_grow_is_named_and_labelled_with_its_epoch() -> None:
    """The planner tells a job's Workloads apart by the epoch they were asked in: the first is
    named after the job (epoch 0), one asked for to grow names its epoch; both read back."""
    first, grow = (
        workload(queued(), 4, 2, True, BuildSettings()),
        workload(queued(), 4, 3, True, BuildSettings(), epoch=7),
    )
    assert (first["metadata"]["name"], grow["metadata"]["name"]) == ("j", "j-grow-7")
    assert grow["metadata"]["labels"]["phalanx.dev/epoch"] == "7"
    assert grow["spec"]["podSets"][0]["minCount"] == 3
    assert observe.workload_view(grow).epoch == 7
    assert observe.workload_view(first).epoch == 0
    assert observe.workload_view(body({})).epoch == 0, "no label: the job's first"
