"""Pod logs by node rank, through the API service and the real API server's log proxy, with the
test as the kubelet that holds the log (tests/support/kubelet_logs.py).

Covers: the last N lines of node rank 1 of the current epoch; `follow` delivering lines as they
are written, ending when the container does; a node rank the epoch lacks (404); a caller without
`pods/log` (403, not a broken stream).
"""

from __future__ import annotations

import threading

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane, wait_until
from harness.rbac import grant, grant_jobs, identity
from phalanx.sdk import Client, ForbiddenError, NotFoundError
from tests.integration.operator.conftest import Cluster
from tests.support.apiserver import running_api
from tests.support.kubelet_logs import serving_logs

LINES = [f"step {i} loss {4 - i / 10:.1f}" for i in range(1, 4)]


def test_logs_by_node_rank_tail_and_follow(
    cluster: Cluster, control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    reader = identity(kube_client, namespace, "reader")
    grant_jobs(kube_client, namespace, reader)
    read_logs = k8s.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"])
    grant(kube_client, namespace, reader, "logs", [read_logs])
    stranger = identity(kube_client, namespace, "no-logs")
    grant_jobs(kube_client, namespace, stranger)

    cluster.create_job("talk", nprocPerNode=1)
    cluster.kubelet.start_gang("talk", 1, 4)
    cluster.wait_status("talk", lambda s: s.get("phase") == "Running", "Running")
    nodes = [f"node-{i}" for i in range(4)]
    with (
        serving_logs(k8s.CoreV1Api(kube_client), control_plane.pki, nodes) as kubelet_logs,
        running_api(kube_client) as url,
        Client(url, token=reader.token, namespace=namespace) as phalanx,
    ):
        kubelet_logs.append("talk-1-1", *LINES)
        assert list(phalanx.logs("talk", node=1, tail_lines=2)) == LINES[1:]
        assert any("/talk-1-1/trainer" in r and "tailLines=2" in r for r in kubelet_logs.requests)

        received: list[str] = []

        def follow() -> None:
            for line in phalanx.logs("talk", node=1, follow=True):
                received.append(line)

        follower = threading.Thread(target=follow)
        follower.start()
        wait_until(lambda: len(received) == len(LINES), 10, "the lines so far, followed")
        kubelet_logs.append("talk-1-1", "step 4 loss 3.6")
        wait_until(lambda: "step 4 loss 3.6" in received, 10, "a followed line to arrive live")
        assert follower.is_alive(), "follow ended before the container did"
        kubelet_logs.finish("talk-1-1")
        follower.join(timeout=10)
        assert not follower.is_alive(), "follow did not end with the container"
        assert received == [*LINES, "step 4 loss 3.6"]

        with pytest.raises(NotFoundError, match="no node rank 4 in epoch 1"):
            list(phalanx.logs("talk", node=4))
        with (
            Client(url, token=stranger.token, namespace=namespace) as denied,
            pytest.raises(ForbiddenError, match='cannot get resource "pods/log"'),
        ):
            list(denied.logs("talk", node=1))
