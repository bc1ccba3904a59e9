"""The heartbeat Lease drives hang and straggler detection.

Scenarios 5 and 6 of the operator issue.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.integration.operator.conftest import Cluster


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _at_step(step: int) -> Callable[[dict[str, Any]], bool]:
    return lambda status: (status.get("progress") or {}).get("step") == step


def test_stalled_step_is_a_hang_restart_within_timeout_plus_2s(cluster: Cluster) -> None:
    cluster.create_job("hung", failurePolicy={"hangTimeoutSeconds": 3})
    cluster.kubelet.start_gang("hung", 1, 4)
    cluster.wait_status("hung", lambda s: s.get("phase") == "Running", "Running")
    for step in (1, 2, 3):
        cluster.kubelet.heartbeat("hung", {"epoch": 1, "step": step, "loss": 3.0 - step / 10})
        cluster.wait_status("hung", _at_step(step), f"step {step}")
    advanced = _time(cluster.status("hung")["progress"]["updatedAt"])
    # the step stops advancing; the Lease keeps being renewed with the same step
    cluster.kubelet.heartbeat("hung", {"epoch": 1, "step": 3})
    status = cluster.wait_status(
        "hung", lambda s: s.get("epoch") == 2, "a hang restart", timeout=20
    )
    failure = status["failures"][-1]
    assert (failure["class"], failure["reason"]) == ("infrastructure", "Hang")
    detected = (_time(failure["time"]) - advanced).total_seconds()
    assert 3 <= detected <= 3 + 2, f"hang detected {detected:.2f} s after the last step"
    cluster.wait_event("hung", "Hang")
    assert status["restarts"]["infrastructure"] == 1


def test_slow_rank_marks_a_straggler_and_its_node_is_avoided(cluster: Cluster) -> None:
    cluster.create_job("slow")
    cluster.kubelet.start_gang("slow", 1, 4)
    cluster.wait_status("slow", lambda s: s.get("phase") == "Running", "Running")
    times = [1.0] * 8
    times[5] = 3.2  # global rank 5 = node rank 2 (2 processes per node), on node-2
    cluster.kubelet.heartbeat(
        "slow", {"epoch": 1, "step": 40, "rankStepSeconds": times, "windowSteps": 20}
    )
    status = cluster.wait_status("slow", lambda s: s.get("epoch") == 2, "a straggler restart")
    assert status["avoidNodes"] == ["node-2"]
    assert status["failures"][-1]["reason"] == "Straggler"
    assert status["failures"][-1]["node"] == "node-2"
    cluster.wait_event("slow", "Straggler")
    pods = cluster.kubelet.wait_pods("slow", 2, 3)  # at once without node-2's pod, then grows
    for pod in pods.values():
        terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
        assert [(e.key, e.operator, e.values) for t in terms for e in t.match_expressions] == [
            ("kubernetes.io/hostname", "NotIn", ["node-2"])
        ]
