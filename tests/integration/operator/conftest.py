"""An operator running in-process against the real API server, a kubelet played by the test, and
helpers to read what the operator wrote (status, events, metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from phalanx.models.job import GROUP, PLURAL, VERSION
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.settings import OperatorSettings
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_thread

NCCL_DEFAULTS = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}


@dataclass
class Cluster:
    """What a scenario test works with."""

    namespace: str
    api: k8s.ApiClient
    kubelet: FakeKubelet
    metrics: OperatorMetrics
    settings: OperatorSettings

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    def create_job(self, name: str, **spec: Any) -> dict[str, Any]:
        return cast(dict[str, Any], self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, operator_job(name, **spec)))  # fmt: skip

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec}
        )

    def job(self, name: str) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name),
        )

    def status(self, name: str) -> dict[str, Any]:
        return cast(dict[str, Any], self.job(name).get("status") or {})

    def wait_status(
        self, name: str, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30
    ) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def ok() -> bool:
            nonlocal seen
            seen = self.status(name)
            return check(seen)

        try:
            wait_until(ok, timeout, f"{name}: {what}", interval=0.1)
        except TimeoutError as error:
            raise AssertionError(f"{error}; last status: {seen}") from error
        return seen

    def events(self, name: str) -> list[tuple[str, str, str]]:
        items = (
            k8s.CoreV1Api(self.api)
            .list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={name}")
            .items
        )
        return [
            (e.type or "", e.reason or "", e.message or "")
            for e in sorted(items, key=lambda e: e.metadata.creation_timestamp)
        ]

    def event_reasons(self, name: str) -> list[str]:
        """Reasons of the job's events (ordered by second-resolution timestamps: ties unordered)."""
        return [reason for _, reason, _ in self.events(name)]

    def wait_event(self, name: str, reason: str, timeout: float = 10) -> None:
        """Events are emitted after the status write, so they may trail what status shows."""
        wait_until(
            lambda: reason in self.event_reasons(name), timeout, f"a {reason} event on {name}"
        )

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return value or 0.0

    def wait_metric(self, name: str, expected: float, timeout: float = 10, **labels: str) -> None:
        """The operator sets metrics once the status write returns, so a test watching the status
        can see it a moment before the metric follows."""
        try:
            wait_until(
                lambda: self.metric(name, **labels) == expected,
                timeout,
                f"{name}{labels} == {expected}",
                interval=0.05,
            )
        except TimeoutError as error:
            raise AssertionError(f"{error}; last value: {self.metric(name, **labels)}") from error


def operator_settings(
    control_plane: ControlPlane, namespace: str, **overrides: Any
) -> OperatorSettings:
    values: dict[str, Any] = {
        "namespaces": [namespace],
        "kubeconfig": control_plane.kubeconfig,
        "nccl_defaults": NCCL_DEFAULTS,
        "metrics_port": 0,
        "liveness_endpoint": None,
        "grow_cooldown_seconds": 1.0,
        "straggler_min_window": 5,
        "resync_seconds": 5.0,
        **overrides,
    }
    return OperatorSettings(**values)


@pytest.fixture
def kubelet(kube_client: k8s.ApiClient, namespace: str) -> Iterator[FakeKubelet]:
    """The test's kubelet for the namespace, with six Ready nodes (node-0..node-5)."""
    kubelet = FakeKubelet(kube_client, namespace)
    kubelet.add_nodes(*(f"node-{i}" for i in range(6)))
    yield kubelet
    kubelet.close()
    for i in range(6):
        kubelet.set_node_ready(f"node-{i}", True)


@pytest.fixture
def cluster(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str, kubelet: FakeKubelet
) -> Iterator[Cluster]:
    """A running operator watching a fresh namespace, and the kubelet."""
    settings = operator_settings(control_plane, namespace)
    metrics = OperatorMetrics()
    with operator_thread(settings, metrics):
        yield Cluster(namespace, kube_client, kubelet, metrics, settings)
