"""Optional gang scheduling: with `gang: true`, a scheduler name and the PodGroup CRD served,
the job gets one PodGroup whose minMember follows each epoch's node count, and the pods of every
epoch join it: a replacement joins the group its carried-over peers are in."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from phalanx.operator.metrics import OperatorMetrics
from tests.integration.operator.conftest import operator_settings
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_thread


def test_a_gang_jobs_podgroup_is_the_jobs_and_follows_its_size(
    podgroup_crd: None,
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
) -> None:
    with operator_thread(operator_settings(control_plane, namespace), OperatorMetrics()):
        custom = k8s.CustomObjectsApi(kube_client)
        custom.create_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs",
            operator_job("ganged", gang=True, schedulerName="scheduler-plugins-scheduler"),
        )  # fmt: skip

        def group() -> dict[str, Any]:
            return custom.get_namespaced_custom_object(
                "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", "ganged"
            )

        pods = kubelet.start_gang("ganged", 1, 4)
        assert group()["spec"]["minMember"] == 4
        assert group()["metadata"]["ownerReferences"][0]["name"] == "ganged"
        kubelet.exit(pods[3].metadata.name, 1)  # a new epoch; shrink it to 3 by hand
        custom.patch_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs", "ganged",
            {"spec": {"replicas": {"desired": 3}}},
        )  # fmt: skip
        wait_until(lambda: group()["spec"]["minMember"] == 3, 30, "minMember to follow the size")
        epoch = custom.get_namespaced_custom_object(
            "phalanx.dev", "v1alpha1", namespace, "trainingjobs", "ganged"
        )["status"]["epoch"]
        for pod in [*pods.values(), *kubelet.wait_pods("ganged", epoch, 3).values()]:
            assert pod.metadata.labels["scheduling.x-k8s.io/pod-group"] == "ganged"
            assert pod.spec.scheduler_name == "scheduler-plugins-scheduler"
