"""Closing ranks: replacements that stay unschedulable make the job shrink to a size that keeps
the data-parallel degree an integer (never below min), and it grows back when capacity returns.

Scenario 4 of the operator issue.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.operator.conftest import Cluster


@pytest.mark.parametrize(
    ("spec", "shrunk"),
    [({}, 3), ({"parallelism": {"tensor": 2, "pipeline": 2}}, 2)],
    ids=["dp-only-shrinks-to-3", "tp2xpp2-shrinks-to-2"],
)
def test_shrink_when_unschedulable_then_grow_back(
    cluster: Cluster, spec: dict[str, Any], shrunk: int
) -> None:
    cluster.create_job("elastic", failurePolicy={"scheduleTimeoutSeconds": 3}, **spec)
    pods = cluster.kubelet.wait_pods("elastic", 1, 4)
    for rank in range(3):
        cluster.kubelet.bind(pods[rank].metadata.name, f"node-{rank}")
        cluster.kubelet.run(pods[rank].metadata.name)
    cluster.kubelet.unschedulable(pods[3].metadata.name)

    status = cluster.wait_status("elastic", lambda s: s.get("epoch") == 2, "a shrink to epoch 2")
    assert (status["nodes"], status["restarts"]["total"]) == (shrunk, 0)
    assert status["worldSize"] == shrunk * 2
    cluster.wait_event("elastic", "Shrink")
    cluster.kubelet.start_gang("elastic", 2, shrunk)
    cluster.wait_status("elastic", lambda s: s.get("phase") == "Running", "Running shrunk")
    cluster.wait_metric(
        "phalanx_world_size", shrunk * 2, namespace=cluster.namespace, job="elastic"
    )

    standbys = cluster.kubelet.wait_pods("elastic", 2, 4 - shrunk, role="standby")
    for index, pod in standbys.items():  # capacity returns: the standbys schedule
        cluster.kubelet.bind(pod.metadata.name, f"node-{3 + index}")

    status = cluster.wait_status("elastic", lambda s: s.get("epoch") == 3, "a grow to epoch 3")
    assert (status["nodes"], status["worldSize"]) == (4, 8)
    cluster.wait_event("elastic", "Grow")
    cluster.kubelet.start_gang("elastic", 3, 4)
    cluster.wait_status("elastic", lambda s: s.get("phase") == "Running", "Running at full size")
    assert cluster.kubelet.pods("elastic", role="standby") == {}
    cluster.wait_metric("phalanx_world_size", 8, namespace=cluster.namespace, job="elastic")


def test_never_below_min(cluster: Cluster) -> None:
    cluster.create_job(
        "floor", replicas={"min": 4, "max": 4}, failurePolicy={"scheduleTimeoutSeconds": 1}
    )
    pods = cluster.kubelet.wait_pods("floor", 1, 4)
    for rank in range(3):
        cluster.kubelet.bind(pods[rank].metadata.name, f"node-{rank}")
    cluster.kubelet.unschedulable(pods[3].metadata.name)
    # The scheduler's words come with the pod's next status, which the 1 s timeout can beat:
    # the condition is waited for with them (never having them fails here).
    words = "pod floor-1-3: 0/4 nodes are available"
    status = cluster.wait_status(
        "floor",
        lambda s: any(
            c["type"] == "Unschedulable"
            and c["reason"] == "InsufficientCapacity"
            and c["message"].endswith(words)
            for c in s.get("conditions", [])
        ),
        "an Unschedulable condition past scheduleTimeoutSeconds, in the scheduler's words",
    )
    assert (status["epoch"], status["nodes"]) == (1, 4)
    message = next(c for c in status["conditions"] if c["type"] == "Unschedulable")["message"]
    assert "min is 4" in message
