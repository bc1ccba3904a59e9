"""The local cluster with real processes: binding to free nodes, capacity changes, lost nodes,
and deletion with a grace period (SIGTERM, then SIGKILL for a process that ignores it)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from harness.controlplane import wait_until
from phalanx.local.cluster import Launch, LocalCluster, LocalPod

IGNORES_SIGTERM = (
    "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"
)
EXITS_ON_SIGTERM = "import time; time.sleep(120)"


def node_pod(tmp_path: Path, rank: int, code: str = EXITS_ON_SIGTERM, epoch: int = 1) -> LocalPod:
    launch = Launch(
        (sys.executable, "-c", code, str(tmp_path / f"{rank}.ready")),
        {"PHALANX_TRAINER_LOG_DIR": str(tmp_path / "log")},  # the leftover check finds it
        tmp_path / f"{rank}.log",
        tmp_path / f"{rank}.termination-log",
    )
    return LocalPod(f"job-{epoch}-{rank}", epoch, rank, "node", 3, datetime.now(UTC), launch)


def test_pods_beyond_capacity_stay_pending_and_node_pods_bind_before_standbys(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(grace_seconds=1)
    cluster.set_capacity(2)
    cluster.create(LocalPod("job-1-s0", 1, 0, "standby", 0, datetime.now(UTC)))
    for rank in range(2):
        cluster.create(node_pod(tmp_path, rank))
    try:
        cluster.tick()
        views = {v.name: v for v in cluster.observed(None).pods}
        assert views["job-1-0"].scheduled
        assert views["job-1-0"].phase == "Running"
        assert views["job-1-1"].scheduled
        assert not views["job-1-s0"].scheduled
        cluster.set_capacity(3)
        cluster.tick()
        assert cluster.pods["job-1-s0"].node is not None
    finally:
        cluster.shutdown()


def test_shrinking_loses_standbys_first_then_the_highest_node_rank(tmp_path: Path) -> None:
    cluster = LocalCluster(grace_seconds=1)
    cluster.set_capacity(4)
    for rank in range(2):
        cluster.create(node_pod(tmp_path, rank))
    cluster.create(LocalPod("job-1-s0", 1, 0, "standby", 0, datetime.now(UTC)))
    try:
        cluster.tick()
        assert cluster.set_capacity(2) == []  # the idle node, then the standby's node
        assert "job-1-s0" not in cluster.pods
        lost = cluster.set_capacity(1)
        assert lost == [cluster.pods["job-1-1"].node]
        observed = cluster.observed(None)
        pod = next(p for p in observed.pods if p.name == "job-1-1")
        assert (pod.phase, pod.exit_code) == ("Failed", 137)
        assert observed.nodes[lost[0]].ready is False
        assert cluster.pods["job-1-0"].alive
    finally:
        cluster.shutdown()


def test_delete_waits_for_sigterm_then_kills_after_the_grace_period(tmp_path: Path) -> None:
    cluster = LocalCluster(grace_seconds=1.0)
    cluster.set_capacity(2)
    cluster.create(node_pod(tmp_path, 0, EXITS_ON_SIGTERM))
    cluster.create(node_pod(tmp_path, 1, IGNORES_SIGTERM))
    try:
        cluster.tick()
        ready = tmp_path / "1.ready"
        wait_until(ready.exists, 10, "the stubborn process to ignore SIGTERM")
        cluster.delete("job-1-0")
        cluster.delete("job-1-1")

        def gone(name: str) -> bool:
            cluster.tick()
            return name not in cluster.pods

        wait_until(lambda: gone("job-1-0"), 5, "the polite pod to exit on SIGTERM")
        assert "job-1-1" in cluster.pods, "a pod that ignores SIGTERM is gone before its grace"
        wait_until(lambda: gone("job-1-1"), 10, "the stubborn pod to be killed after the grace")
    finally:
        cluster.shutdown()
