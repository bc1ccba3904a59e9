"""The benchmarks' simulated agents (`bench.controlplane.agent_fleet`) against the real operator: a job they
play trains as the operator sees a training job, and restarts in place when one of them reports
its worker killed.

Why a test for a benchmark's part: the control-plane and large-job figures are only as good as
the fleet's likeness to real agents. A fleet that said `training` without rank 0's heartbeat
left every job it played looking stuck in start-up, and at 1 000 jobs on a slow machine the
operator restarted them all before the storm began (found at aa05a9c).
"""

from __future__ import annotations

from typing import Any

from bench.controlplane.agent_fleet import FAILURE_POLICY, AgentFleet
from harness.controlplane import ControlPlane
from phalanx.models.names import node_pod_name
from tests.integration.operator.conftest import Cluster
from tests.integration.operator.test_inplace import as_pods


def _trains(epoch: int) -> Any:
    return lambda s: s.get("phase") == "Running" and (s.get("progress") or {}).get("epoch") == epoch


def test_a_job_the_fleet_plays_trains_and_restarts_in_place(
    control_plane: ControlPlane, cluster: Cluster
) -> None:
    cluster.create_job(
        "fleet", replicas={"min": 2, "max": 2}, nprocPerNode=1,
        failurePolicy=FAILURE_POLICY,
    )  # fmt: skip
    with as_pods(control_plane, cluster, "fleet") as api:
        fleet = AgentFleet(cluster.api, api, cluster.namespace).start(["fleet"])
        try:
            cluster.kubelet.start_gang("fleet", 1, 2)
            status = cluster.wait_status("fleet", _trains(1), "epoch 1 training")
            assert status["progress"]["step"] == 1

            fleet.fail(node_pod_name("fleet", 1, 1))
            status = cluster.wait_status("fleet", _trains(2), "epoch 2 training")
            assert status["failures"][-1]["reason"] == "Killed"
            assert sorted(status["current"]["ranks"]) == [
                node_pod_name("fleet", 1, rank) for rank in range(2)
            ], "both pods carried over: restarted in place"
            assert not fleet.errors
        finally:
            fleet.stop()
