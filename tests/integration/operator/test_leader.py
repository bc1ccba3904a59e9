"""Two operator replicas with leader election: one acts, the other stands by. The leader killed
(SIGKILL) in the middle of a resize: the other takes the Lease once it expires and finishes the
same epoch, with no duplicate pod and no epoch repeated or skipped. A leader stopped cleanly
(SIGTERM, as in a rollout) releases the Lease, and the other takes it at once. A leader frozen
(SIGSTOP) is replaced, and woken it writes nothing and exits.

The replicas are real processes (`python -m phalanx.operator`) against the real API server; the
takeover times are printed, not asserted (figures belong to bench/; the Lease duration is 4 s
here, 10 s by default).
"""

from __future__ import annotations

import functools
import signal
import time
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.jobs import operator_job
from phalanx.models.job import GROUP, PLURAL, VERSION
from tests.support.kubelet import FakeKubelet
from tests.support.operator_process import operator_process

LEASE = "phalanx-operator-leader"
OWNER = "phalanx-operator"


def _election(namespace: str, identity: str) -> dict[str, str]:
    return {
        "PHALANX_OPERATOR_LEADER_ELECTION": "true",
        "PHALANX_OPERATOR_LEADER_NAMESPACE": namespace,
        "PHALANX_OPERATOR_LEADER_IDENTITY": identity,
        "PHALANX_OPERATOR_LEADER_LEASE_SECONDS": "4",
        "PHALANX_OPERATOR_LEADER_OWNER": OWNER,
    }


def _owner(kube_client: k8s.ApiClient, namespace: str) -> None:
    """The operator's ServiceAccount, which owns the Lease (the chart's)."""
    account = k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=OWNER))
    k8s.CoreV1Api(kube_client).create_namespaced_service_account(namespace, account)


def _status(kube_client: k8s.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    job = k8s.CustomObjectsApi(kube_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return cast(dict[str, Any], cast(dict[str, Any], job).get("status") or {})


def _lease(kube_client: k8s.ApiClient, namespace: str) -> k8s.V1LeaseSpec | None:
    """The leader Lease's spec (None: no Lease yet)."""
    try:
        return k8s.CoordinationV1Api(kube_client).read_namespaced_lease(LEASE, namespace).spec
    except k8s.ApiException:
        return None


def _holder(kube_client: k8s.ApiClient, namespace: str) -> str | None:
    spec = _lease(kube_client, namespace)
    return spec.holder_identity if spec else None


def test_the_standby_replica_finishes_a_resize_when_the_leader_is_killed(
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    custom = k8s.CustomObjectsApi(kube_client)
    status = functools.partial(_status, kube_client, namespace, "ha")
    holder = functools.partial(_holder, kube_client, namespace)

    _owner(kube_client, namespace)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, operator_job("ha"))
    log_a, log_b = tmp_path / "replica-a.log", tmp_path / "replica-b.log"
    with operator_process(control_plane, namespace, log_a,
                          extra_env=_election(namespace, "replica-a")) as a:  # fmt: skip
        wait_until(lambda: holder() == "replica-a", 30, "replica-a to lead", interval=0.1)
        with operator_process(control_plane, namespace, log_b,
                              extra_env=_election(namespace, "replica-b")):  # fmt: skip
            wait_until(lambda: "stands by" in log_b.read_text(), 30, "replica-b to stand by")
            kubelet.start_gang("ha", 1, 4)
            wait_until(lambda: status().get("phase") == "Running", 60, "Running", interval=0.2)
            assert holder() == "replica-a", "the standby replica took the Lease from a live leader"
            kubelet.reaping.clear()  # old pods stay Terminating: the resize cannot finish yet
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, "ha", {"spec": {"replicas": {"desired": 2}}}
            )
            wait_until(lambda: status().get("epoch") == 2, 30, "the resize to start", interval=0.05)
            a.kill()
            killed = time.monotonic()
            a.wait(timeout=10)
            kubelet.reaping.set()
            wait_until(lambda: holder() == "replica-b", 30, "replica-b to lead", interval=0.1)
            print(f"takeover after SIGKILL: {time.monotonic() - killed:.1f} s (Lease 4 s)")
            pods = kubelet.start_gang("ha", 2, 2)
            wait_until(
                lambda: status().get("phase") == "Running", 60, "Running again", interval=0.2
            )
            assert status()["epoch"] == 2, "the resize's epoch was repeated or skipped"
    all_pods = (
        k8s.CoreV1Api(kube_client)
        .list_namespaced_pod(namespace, label_selector="phalanx.dev/job=ha")
        .items
    )
    assert sorted(str(p.metadata.name) for p in all_pods) == ["ha-2-0", "ha-2-1"]
    assert {p.metadata.uid for p in all_pods} == {p.metadata.uid for p in pods.values()}
    events = (
        k8s.CoreV1Api(kube_client)
        .list_namespaced_event(namespace, field_selector="involvedObject.name=ha")
        .items
    )
    assert [e.reason for e in events].count("Shrink") <= 1, "the decision was taken twice"
    assert "leads" in log_b.read_text()


def test_a_leader_stopped_cleanly_hands_over_at_once(
    control_plane: ControlPlane, namespace: str, kube_client: k8s.ApiClient, tmp_path: Path
) -> None:
    leases = k8s.CoordinationV1Api(kube_client)

    def lease() -> k8s.V1LeaseSpec | None:
        return _lease(kube_client, namespace)

    def held_by(identity: str) -> bool:
        return _holder(kube_client, namespace) == identity

    _owner(kube_client, namespace)
    log = tmp_path / "operators.log"
    with operator_process(control_plane, namespace, log,
                          extra_env=_election(namespace, "replica-a")) as a:  # fmt: skip
        wait_until(lambda: held_by("replica-a"), 30, "replica-a to lead", interval=0.1)
        with operator_process(control_plane, namespace, log,
                              extra_env=_election(namespace, "replica-b")):  # fmt: skip
            wait_until(lambda: "replica-b stands by" in log.read_text(), 30, "b to stand by")
            spec = lease()
            assert spec is not None
            transitions = spec.lease_transitions or 0
            a.terminate()
            stopped = time.monotonic()
            assert a.wait(timeout=30) == 0, "a clean stop exits 0"
            exited = time.monotonic()
            assert "replica-a released the Lease" in log.read_text()
            wait_until(lambda: held_by("replica-b"), 30, "replica-b to lead", interval=0.05)
            print(f"SIGTERM -> exit {exited - stopped:.1f} s, exit -> takeover "
                  f"{time.monotonic() - exited:.1f} s (Lease 4 s)")  # fmt: skip
            spec = lease()
            assert spec is not None
            assert (spec.lease_transitions or 0) == transitions + 1
    meta = leases.read_namespaced_lease(LEASE, namespace).metadata
    assert meta is not None
    [owner] = meta.owner_references or []
    assert (owner.kind, owner.name) == ("ServiceAccount", OWNER), "it goes with its owner"


def test_a_frozen_leader_is_replaced_and_acts_no_more_when_it_wakes(
    control_plane: ControlPlane,
    kube_client: k8s.ApiClient,
    namespace: str,
    kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    """A leader that stops (SIGSTOP: a paused VM, a stalled machine) renews nothing: the standby
    takes the Lease and resizes the job meanwhile. Woken, the old leader finds its renewal past
    its deadline: it carries out no plan of what it saw before the pause, and exits."""
    custom = k8s.CustomObjectsApi(kube_client)
    status = functools.partial(_status, kube_client, namespace, "frozen")
    holder = functools.partial(_holder, kube_client, namespace)

    _owner(kube_client, namespace)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, operator_job("frozen")
    )
    log_a, log_b = tmp_path / "replica-a.log", tmp_path / "replica-b.log"
    with operator_process(control_plane, namespace, log_a,
                          extra_env=_election(namespace, "replica-a")) as a:  # fmt: skip
        wait_until(lambda: "replica-a leads" in log_a.read_text(), 30, "replica-a to lead")
        with operator_process(control_plane, namespace, log_b,
                              extra_env=_election(namespace, "replica-b")):  # fmt: skip
            wait_until(lambda: "stands by" in log_b.read_text(), 30, "replica-b to stand by")
            kubelet.start_gang("frozen", 1, 4)
            wait_until(lambda: status().get("phase") == "Running", 60, "Running", interval=0.2)
            a.send_signal(signal.SIGSTOP)
            try:
                wait_until(lambda: holder() == "replica-b", 30, "replica-b to lead", interval=0.1)
                custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "frozen",
                                                      {"spec": {"replicas": {"desired": 2}}})  # fmt: skip
                wait_until(lambda: status().get("epoch") == 2, 30, "b to resize", interval=0.1)
                pods = kubelet.start_gang("frozen", 2, 2)
                wait_until(lambda: status().get("phase") == "Running", 60, "Running on 2",
                           interval=0.2)  # fmt: skip
            finally:
                a.send_signal(signal.SIGCONT)
            assert a.wait(timeout=30) == 1, "the woken leader exits, to stand by anew"
            text = log_a.read_text()
            assert "replica-a lost the Lease" in text
            assert status()["epoch"] == 2
    all_pods = (
        k8s.CoreV1Api(kube_client)
        .list_namespaced_pod(namespace, label_selector="phalanx.dev/job=frozen")
        .items
    )
    assert {p.metadata.uid for p in all_pods} == {p.metadata.uid for p in pods.values()}, (
        "the woken leader created or deleted pods"
    )
