"""In-place restarts through the real API server: the agents' side of the channel (their Lease
watch and reports, with the pod's own service-account token) against the running operator.

A worker of one pod fails; its agent reports it on the heartbeat Lease; the operator starts
epoch 2 without deleting or creating a pod and publishes the assignment, which every agent's
watch receives; once they report running, the job runs again and a Recovered event says where
the time went.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from phalanx.agent.kubeapi import KubeAPI, KubeError, lease_path
from phalanx.agent.lease_channel import LeaseAssignments, LeaseReports
from phalanx.agent.wire import Report
from phalanx.models.report_shards import SHARED_RANKS, report_lease, shard_lease, shards_for
from phalanx.models.vocabulary import AgentState
from tests.integration.operator.conftest import Cluster


@contextmanager
def as_pods(control_plane: ControlPlane, cluster: Cluster, job: str) -> Iterator[KubeAPI]:
    """The agent's API client with the token of the job's pods' service account."""
    core = k8s.CoreV1Api(cluster.api)
    wait_until(
        lambda: any(
            sa.metadata.name == f"{job}-phalanx"
            for sa in core.list_namespaced_service_account(cluster.namespace).items
        ),
        10, "the pods' service account",
    )  # fmt: skip
    request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token(
        f"{job}-phalanx", cluster.namespace, request
    ).status.token
    yield KubeAPI(control_plane.server, token=token, ca_file=control_plane.pki.ca_cert)


def test_a_failed_worker_restarts_the_gang_in_place(
    control_plane: ControlPlane, cluster: Cluster
) -> None:
    ns = cluster.namespace
    cluster.create_job("inplace")
    pods = cluster.kubelet.start_gang("inplace", 1, 4)
    names = [str(pods[r].metadata.name) for r in range(4)]
    with as_pods(control_plane, cluster, "inplace") as api:
        reports = LeaseReports(ns, "inplace-heartbeat", api=api)
        watched = LeaseAssignments(ns, "inplace-assignment", api=api, watch_seconds=2)

        def report(pod: str, state: AgentState, epoch: int, **fields: Any) -> None:
            reports.publish(Report(pod, state, datetime.now(UTC), epoch, **fields))

        wait_until(lambda: (a := watched.current()) is not None and a.epoch == 1, 10,
                   "the agents to see epoch 1's assignment")  # fmt: skip
        for name in names:
            report(name, "running", 1)
        cluster.wait_status("inplace", lambda s: s.get("phase") == "Running", "Running")

        report(names[2], "failed", 1, exit_code=137, message="worker rank 4 killed by SIGKILL",
               failed_at=datetime.now(UTC))  # fmt: skip
        status = cluster.wait_status("inplace", lambda s: s.get("epoch") == 2, "epoch 2")
        assert status["current"]["ranks"] == {name: rank for rank, name in enumerate(names)}
        assert status["failures"][-1]["reason"] == "Killed"
        wait_until(lambda: (a := watched.current()) is not None and a.epoch == 2, 10,
                   "the agents to see epoch 2's assignment")  # fmt: skip
        assignment = watched.current()
        assert assignment is not None
        assert assignment.ranks == {name: rank for rank, name in enumerate(names)}
        assert assignment.master_addr.startswith(f"{names[0]}.inplace.{ns}.svc.")
        live = cluster.kubelet.pods("inplace")
        assert sorted(str(p.metadata.name) for p in live.values()) == sorted(names), (
            "no pod replaced"
        )

        for name in names:
            report(name, "running", 2)
        cluster.kubelet.heartbeat("inplace", {"epoch": 2, "step": 41})
        cluster.wait_status("inplace", lambda s: s.get("phase") == "Running", "Running again")
        cluster.wait_event("inplace", "Recovered")
        watched.stop()
    assert cluster.kubelet.pods("inplace", epoch=2) == {}, "no pod of epoch 2 was created"


def test_a_job_of_many_ranks_reads_its_agents_on_every_report_lease(
    control_plane: ControlPlane, cluster: Cluster
) -> None:
    """The last rank's agent reports on a report Lease of its own (past the ranks that share the
    heartbeat Lease), which only the job's pods may write; the operator reads every Lease, so
    every pod carries over into the in-place epoch."""
    ns, size = cluster.namespace, SHARED_RANKS + 1
    cluster.create_job("wide", replicas={"min": size, "max": size})
    pods = cluster.kubelet.start_gang("wide", 1, size)
    names = [str(pods[r].metadata.name) for r in range(size)]
    with as_pods(control_plane, cluster, "wide") as api:
        reports = LeaseReports(ns, "wide-heartbeat", api=api)
        for name in names:
            reports.publish(Report(name, "running", datetime.now(UTC), 1))
        last = report_lease("wide-heartbeat", names[-1])
        shard = k8s.CoordinationV1Api(cluster.api).read_namespaced_lease(last, ns)
        assert set(shard.metadata.annotations) == {f"agent.phalanx.dev/{names[-1]}"}
        past = shard_lease("wide-heartbeat", shards_for(size))
        with pytest.raises(KubeError) as denied:  # a shard past the job's, not granted
            api.merge_patch(lease_path(ns, past), {"metadata": {"labels": {}}})
        assert denied.value.status == 403
        cluster.wait_status("wide", lambda s: s.get("phase") == "Running", "Running")
        reports.publish(Report(names[-1], "failed", datetime.now(UTC), 1, exit_code=137,
                               message="worker killed", failed_at=datetime.now(UTC)))  # fmt: skip
        status = cluster.wait_status("wide", lambda s: s.get("epoch") == 2, "epoch 2")
    assert status["current"]["ranks"] == {name: rank for rank, name in enumerate(names)}, (
        "every pod carried over in place: the operator saw both Leases' reports"
    )
