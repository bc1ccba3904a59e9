"""The operator's pod index (`phalanx.operator.cluster.pod_watch`): what each watch event and each fresh
list does to the jobs' pods, which jobs it wakes, and that no job is planned before the first
list."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from harness.jobs import job_manifest
from phalanx.listwatch.protocol import Change, Query
from phalanx.models import labels
from phalanx.operator.cluster.pod_watch import LeaseIndex, LeaseWatch, PodIndex, PodWatch
from phalanx.operator.execute import Executor
from phalanx.operator.handlers import STALE_WAIT_SECONDS, Reconciler
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import PlannerConfig


def _pod(name: str, job: str | None = "j", namespace: str = "ns", phase: str = "Pending",
         node: str | None = None, version: str = "1") -> dict[str, Any]:  # fmt: skip
    pod_labels = {labels.EPOCH: "1", labels.NODE_RANK: name[-1], labels.ROLE: labels.ROLE_NODE}
    if job is not None:
        pod_labels[labels.JOB] = job
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": pod_labels,
                     "resourceVersion": version},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }  # fmt: skip


def test_a_pod_is_stored_under_its_job_and_replaced_by_its_next_state() -> None:
    index = PodIndex()
    assert index.put(_pod("p-0")) == (None, ("ns", "j"))
    assert index.put(_pod("p-0", phase="Running")) == (("ns", "j"), ("ns", "j"))
    (view,) = index.get(("ns", "j"))
    assert (view.name, view.phase) == ("p-0", "Running")
    assert index.get(("ns", "other")) == ()


def test_a_pod_relabelled_to_another_job_moves_and_one_without_a_job_is_dropped() -> None:
    index = PodIndex()
    index.put(_pod("p-0"))
    assert index.put(_pod("p-0", job="k")) == (("ns", "j"), ("ns", "k"))
    assert index.get(("ns", "j")) == ()
    assert index.put(_pod("p-0", job=None)) == (("ns", "k"), None)
    assert index.get(("ns", "k")) == ()


def test_a_deleted_pod_is_forgotten() -> None:
    index = PodIndex()
    index.put(_pod("p-0"))
    index.put(_pod("p-1"))
    assert index.remove(("ns", "p-0")) == ("ns", "j")
    assert [v.name for v in index.get(("ns", "j"))] == ["p-1"]
    assert index.remove(("ns", "p-0")) is None


def test_after_a_fresh_list_what_it_did_not_show_in_its_namespace_is_forgotten() -> None:
    index = PodIndex()
    index.put(_pod("p-0", job="gone"))
    index.put(_pod("p-1", job="kept"))
    index.put(_pod("q-0", job="elsewhere", namespace="other"))
    index.put(_pod("p-1", job="kept", phase="Running"))  # the list's pages, put as they come
    assert index.keep_only({("ns", "p-1")}, "ns") == {("ns", "gone")}
    assert index.get(("ns", "gone")) == ()
    assert [v.phase for v in index.get(("ns", "kept"))] == ["Running"]
    assert [v.name for v in index.get(("other", "elsewhere"))] == ["q-0"]
    assert index.keep_only(set(), None) == {("ns", "kept"), ("other", "elsewhere")}


def _watch(namespaces: list[str]) -> tuple[PodWatch, list[tuple[tuple[str, str], str | None]]]:
    told: list[tuple[tuple[str, str], str | None]] = []
    watch = PodWatch(k8s.Configuration(), namespaces, lambda key, node: told.append((key, node)))
    return watch, told


def test_events_reach_the_index_and_wake_the_job_with_its_node() -> None:
    watch, told = _watch(["ns"])
    watch.apply(Change("ADDED", _pod("p-0", version="7")))
    watch.apply(Change("MODIFIED", _pod("p-0", node="n1", version="8")))
    watch.apply(Change("DELETED", _pod("p-0", node="n1", version="9")))
    assert told == [(("ns", "j"), None), (("ns", "j"), "n1"), (("ns", "j"), "n1")]
    assert watch.index.get(("ns", "j")) == ()


def test_named_namespaces_are_watched_each_and_globs_cluster_wide_filtered() -> None:
    assert _watch(["a", "b"])[0].scopes == ["a", "b"]
    assert _watch([])[0].scopes == [None]
    watch, told = _watch(["team-*", "!team-secret"])
    assert watch.scopes == [None]
    for namespace in ("other", "team-a", "team-secret"):
        watch.apply(Change("ADDED", _pod("p-0", namespace=namespace)))
    assert told == [(("team-a", "j"), None)]


def test_no_job_is_planned_before_its_pods_and_leases_were_listed() -> None:
    unused = cast(Executor, None)  # reached only once the pods were listed
    reconciler = Reconciler(unused, OperatorMetrics(), PlannerConfig(), 30.0, None)
    one = {"min": 1, "max": 1}
    body = job_manifest(namespace="ns", metadata={"resourceVersion": "1"}, replicas=one)
    index, leases = PodIndex(), LeaseIndex()

    def reconcile() -> float | None:
        return asyncio.run(reconciler.reconcile(("ns", "j"), body, index, leases, {}))

    assert reconcile() == STALE_WAIT_SECONDS
    index.listed = True
    assert reconcile() == STALE_WAIT_SECONDS, "its Leases not listed: its ranks look silent"
    leases.listed = True
    with pytest.raises(AttributeError):  # on to observe and plan: the executor is needed
        reconcile()


def _lease(name: str, job: str = "j", annotations: dict[str, str] | None = None,
           renewed: str | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {labels.JOB: job},
                     "annotations": annotations or {}, "resourceVersion": "5"},
        "spec": {"renewTime": renewed} if renewed else {},
    }  # fmt: skip


def test_a_lease_with_a_heartbeat_is_kept_under_its_job_and_one_saying_nothing_is_not() -> None:
    told: list[tuple[str, str]] = []
    watch = LeaseWatch(k8s.Configuration(), ["ns"], told.append)
    query = Query(watch.resource, "ns")
    assert query.path == "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
    watch.apply(Change("ADDED", _lease("j-heartbeat")))
    assert watch.index.get(("ns", "j")) == ()  # made by the operator: rank 0 has not beaten
    beat = {labels.HEARTBEAT: '{"epoch": 1, "step": 7}'}
    renewed = "2026-11-29T06:00:01Z"
    watch.apply(Change("MODIFIED", _lease("j-heartbeat", annotations=beat, renewed=renewed)))
    (facts,) = watch.index.get(("ns", "j"))
    assert facts.heartbeat is not None
    assert facts.heartbeat.step == 7
    assert facts.renewed is not None
    watch.apply(Change("DELETED", _lease("j-heartbeat")))
    assert watch.index.get(("ns", "j")) == ()
    assert told == [("ns", "j")] * 2, "its heartbeat and its going wake the job; made empty, no"


def test_the_first_list_wakes_every_job() -> None:
    unused = cast(Executor, None)
    reconciler = Reconciler(unused, OperatorMetrics(), PlannerConfig(), 30.0, None)
    wakers = [reconciler.waker(("ns", name)) for name in ("a", "b")]
    reconciler.wake_all()
    assert all(waker.is_set() for waker in wakers)
