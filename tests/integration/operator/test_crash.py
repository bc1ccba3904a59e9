"""The operator is killed (SIGKILL) in the middle of a resize and started again: it converges to
the same epoch, with no duplicate pods for an epoch and no epoch skipped or repeated.

Scenario 10 of the operator issue. The operator runs as a real process here, so it can be killed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from phalanx.models.job import GROUP, PLURAL, VERSION
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_process


def test_operator_killed_mid_resize_converges(
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    custom = k8s.CustomObjectsApi(kube_client)

    def status() -> dict[str, Any]:
        job = cast(
            dict[str, Any],
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "crashy"),
        )
        return cast(dict[str, Any], job.get("status") or {})

    log = tmp_path / "operator.log"
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, operator_job("crashy")
    )
    with operator_process(control_plane, namespace, log) as first:
        kubelet.start_gang("crashy", 1, 4)
        wait_until(lambda: status().get("phase") == "Running", 60, "Running", interval=0.2)
        kubelet.reaping.clear()  # old pods now stay Terminating: the resize cannot finish
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "crashy", {"spec": {"replicas": {"desired": 2}}}
        )
        wait_until(
            lambda: status().get("epoch") == 2, 30, "the resize to start (epoch 2)", interval=0.05
        )
        first.kill()
        first.wait(timeout=10)
    assert kubelet.pods("crashy", 2) == {}, "the kill was meant to land before the new epoch's pods"
    assert status()["nodes"] == 2

    kubelet.reaping.set()
    with operator_process(control_plane, namespace, log):
        pods = kubelet.start_gang("crashy", 2, 2)
        wait_until(
            lambda: status().get("phase") == "Running",
            60,
            "Running after the restart",
            interval=0.2,
        )
        uids = {p.metadata.uid for p in pods.values()}
        # a few more reconciles: nothing is recreated, no epoch is added
        kubelet.heartbeat("crashy", {"epoch": 2, "step": 1})
        wait_until(
            lambda: (status().get("progress") or {}).get("step") == 1,
            30,
            "progress",
            interval=0.2,
        )
    assert status()["epoch"] == 2
    all_pods = (
        k8s.CoreV1Api(kube_client)
        .list_namespaced_pod(namespace, label_selector="phalanx.dev/job=crashy")
        .items
    )
    assert sorted(str(p.metadata.name) for p in all_pods) == ["crashy-2-0", "crashy-2-1"]
    assert {p.metadata.uid for p in all_pods} == uids
    events = (
        k8s.CoreV1Api(kube_client)
        .list_namespaced_event(namespace, field_selector="involvedObject.name=crashy")
        .items
    )
    # the first operator may die before emitting its event, but the decision is never repeated
    assert [e.reason for e in events].count("Shrink") <= 1
