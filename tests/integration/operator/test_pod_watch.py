"""The operator's own pod and Lease watches (`phalanx.operator.cluster.pod_watch`) against the real API
server: the first list, then the watch's changes into the jobs' indices (the stream itself:
tests/integration/test_listwatch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from harness.controlplane import ControlPlane
from phalanx.models import labels
from phalanx.operator.cluster import kube
from phalanx.operator.cluster.pod_watch import LeaseWatch, PodWatch

DEADLINE_SECONDS = 30.0


def _pod(name: str, job: str) -> dict[str, Any]:
    pod_labels = {labels.JOB: job, labels.EPOCH: "1", labels.NODE_RANK: name[-1],
                  labels.ROLE: labels.ROLE_NODE}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": pod_labels},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}  # fmt: skip


async def _until(check: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_SECONDS
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS} s: {what}")
        await asyncio.sleep(0.05)


def _names(watch: PodWatch, namespace: str, job: str) -> set[str]:
    return {view.name for view in watch.index.get((namespace, job))}


def test_the_first_list_then_every_change_reaches_the_index(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    core.create_namespaced_pod(namespace, _pod("before-0", "j"))
    core.create_namespaced_pod(namespace, {**_pod("unlabelled-0", "j"), "metadata": {"name": "u"}})
    configuration = kube.load_configuration(control_plane.kubeconfig)
    woken: list[tuple[str, str]] = []

    async def scenario() -> None:
        watch = PodWatch(configuration, [namespace], lambda key, _: woken.append(key))
        running = asyncio.create_task(watch.run())
        try:
            await _until(lambda: watch.index.listed, "the first list")
            assert _names(watch, namespace, "j") == {"before-0"}  # listed, before any watch
            await asyncio.to_thread(core.create_namespaced_pod, namespace, _pod("after-1", "j"))
            await _until(lambda: _names(watch, namespace, "j") == {"before-0", "after-1"},
                         "the new pod in the index")  # fmt: skip
            patch = {"metadata": {"labels": {labels.JOB: "k"}}}
            await asyncio.to_thread(core.patch_namespaced_pod, "after-1", namespace, patch)
            await _until(lambda: _names(watch, namespace, "k") == {"after-1"},
                         "the relabelled pod under its new job")  # fmt: skip
            assert _names(watch, namespace, "j") == {"before-0"}
            await asyncio.to_thread(
                core.delete_namespaced_pod, "before-0", namespace, grace_period_seconds=0
            )
            await _until(lambda: not _names(watch, namespace, "j"), "the deleted pod gone")
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    asyncio.run(scenario())
    assert {(namespace, "j"), (namespace, "k")} <= set(woken)


def test_the_leases_agents_write_reach_the_lease_index(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    leases = k8s.CoordinationV1Api(kube_client)
    meta = {"name": "j-heartbeat", "labels": {labels.JOB: "j"}}
    leases.create_namespaced_lease(namespace, {"metadata": meta, "spec": {}})
    configuration = kube.load_configuration(control_plane.kubeconfig)
    woken: list[tuple[str, str]] = []

    async def scenario() -> None:
        lease_watch = LeaseWatch(configuration, [namespace], woken.append)
        running = asyncio.create_task(lease_watch.run())
        try:
            await _until(lambda: lease_watch.index.listed, "the first list")
            assert lease_watch.index.get((namespace, "j")) == ()  # it says nothing yet
            beat = {"metadata": {"annotations": {labels.HEARTBEAT: '{"epoch": 1, "step": 3}'}}}
            await asyncio.to_thread(leases.patch_namespaced_lease, "j-heartbeat", namespace, beat)

            def step() -> int | None:
                facts = lease_watch.index.get((namespace, "j"))
                return facts[0].heartbeat.step if facts and facts[0].heartbeat else None

            await _until(lambda: step() == 3, "the heartbeat in the index")
            assert (namespace, "j") in woken
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)

    asyncio.run(scenario())
