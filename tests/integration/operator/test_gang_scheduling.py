"""Optional gang scheduling: with `gang: true`, a scheduler name and the PodGroup CRD served,
each epoch gets a PodGroup whose minMember is its node count, and its pods join it."""

from __future__ import annotations

from kubernetes import client as k8s

from phalanx.operator.main import run_in_thread
from phalanx.operator.metrics import OperatorMetrics
from tests.integration.operator.conftest import operator_settings, training_job
from tests.support.controlplane import ControlPlane, wait_until
from tests.support.kubelet import FakeKubelet


def test_gang_job_gets_a_podgroup_per_epoch(
    podgroup_crd: None,
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
) -> None:
    thread, stop, ready = run_in_thread(
        operator_settings(control_plane, namespace), OperatorMetrics()
    )
    try:
        wait_until(ready.is_set, 30, "the operator to be ready")
        custom = k8s.CustomObjectsApi(kube_client)
        custom.create_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs",
            training_job("ganged", gang=True, schedulerName="scheduler-plugins-scheduler"),
        )  # fmt: skip
        pods = kubelet.wait_pods("ganged", 1, 4)
        group = custom.get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "ganged-1"
        )
        assert group["spec"]["minMember"] == 4
        assert group["metadata"]["ownerReferences"][0]["name"] == "ganged"
        for pod in pods.values():
            assert pod.metadata.labels["scheduling.x-k8s.io/pod-group"] == "ganged-1"
            assert pod.spec.scheduler_name == "scheduler-plugins-scheduler"
    finally:
        stop.set()
        thread.join(timeout=30)
