"""Detection: a fault to the planner's decision about it, on the local backend, for a worker
process that crashes, a node that is lost, a node that hangs (SIGSTOP, every process of the pod
frozen, its agent too) and a rank that hangs (its worker SIGSTOPped, the agent running); the hung
rank beside the same hang under stock torchrun, measured in the same run.

Why the decision: it is the end of detection (the restart is recovery, measured by
`bench.recovery.recovery`). A fault's decision is the first Restart, Shrink or Hang event after it.
On the local backend a lost node's processes die with it and the runner sees their exits at its
next tick: the crash and lost-node rows time the runner, not a detection, and have no baseline
(a silent node on a cluster, beside Kubernetes' NodeReady on the same cluster, is measured by the
kind suite: `bench.kind.kind_faults`).

The hang's baseline is measured, not read from torch's constants: the same trainer with the same
settings under `torchrun --max-restarts=1`, a rank SIGSTOPped; its peers wait in the collective
until the trainer's collective timeout (`spec.nccl.timeoutSeconds`, 300 s unset) fails them,
then torchrun stops the group and restarts it. Its decision is the moment torchrun's new workers
exist; the run is bounded (`--torch-hang-limit`) and reported as "over N s" when it ends first.

Kubernetes' own NodeReady detection is measured too (kwok nodes whose kubelet stops on the
project's API server, the real node lifecycle controller at its defaults: grace period 50 s,
monitor period 5 s in v1.33), and reported on its own: nothing on the local backend is its like.

Usage: python -m bench.recovery.detection [--faults 10] [--nodes 5] [--torch-hang-limit 480]
                                 --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from bench.common import stats
from bench.controlplane import kwok
from bench.recovery import torchrun
from bench.recovery.goodput import job, steps_of
from bench.recovery.recovery import TRAIN_SECONDS_BEFORE_FAULT, Injector
from harness.controlplane import ControlPlane, running_control_plane, wait_until
from phalanx.local import LocalRun, RunOptions
from phalanx.models.events import EventReason

DECISIONS = {EventReason.RESTART, EventReason.SHRINK, EventReason.HANG}
NODE_MONITOR_GRACE_SECONDS = 50.0
"""kube-controller-manager's --node-monitor-grace-period default in Kubernetes v1.33 (50 s
since v1.32): a node whose kubelet stops reporting is NotReady (Unknown) after this."""
NODE_MONITOR_PERIOD_SECONDS = 5.0
"""How often the node lifecycle controller looks at the nodes (--node-monitor-period)."""
NODE_CONTROLLERS = f"{ControlPlane.controllers},nodelifecycle"
SCENARIOS = {
    "crash": ("a worker process SIGKILLed", "worker", 0),
    "node": ("a node lost (hot spare standing by)", "spare", 1),
    "hang": ("a node hung (every process of its pod SIGSTOPped: the node falls silent)", "hang", 0),
    "hang-rank": ("a rank hung (its worker SIGSTOPped, the pod's agent running)", "hang-rank", 0),
}
TORCHRUN_BESIDE = "hang-rank"
"""The scenario the torchrun hang baseline is the same fault as (one worker SIGSTOPped)."""


def decisions(faults: int, kind: str, spares: int, workdir: Path) -> list[float]:
    """Seconds from each injected fault to the first decision event after it."""
    run = LocalRun(job(1_000_000, spares), RunOptions(workdir=workdir, fresh=True))
    run.run(Injector(faults, kind, spares))
    events = [e for e in run.executor.events if e.reason in DECISIONS and e.time is not None]
    found = []
    for fault in run.faults:
        after = [e.time for e in events if e.time is not None and e.time >= fault.time]
        if after:
            found.append((min(after) - fault.time).total_seconds())
    return found


def _workers(agent: int) -> dict[int, int | None]:
    """Each rank's worker pid under the torchrun agent (None where it has none now)."""
    found = {rank: torchrun.worker(agent, rank) for rank in range(torchrun.RANKS)}
    return {rank: None if p is None else p.pid for rank, p in found.items()}


def torchrun_hang(workdir: Path, limit: float) -> dict[str, Any]:
    """A rank SIGSTOPped under stock torchrun running the same trainer: seconds to torchrun's
    restart (its new workers exist) and to the first step after it, each None if `limit`
    seconds passed first."""
    agent = torchrun.start(job(1_000_000), workdir, max_restarts=1)
    figures: dict[str, Any] = {"limit": limit, "decision": None, "training_again": None}
    victim: psutil.Process | None = None
    try:
        deadline = time.time() + 300
        while time.time() < deadline and agent.poll() is None:
            steps = steps_of(workdir)
            if steps and time.time() - steps[0]["time"] >= TRAIN_SECONDS_BEFORE_FAULT:
                break
            time.sleep(0.2)
        before = _workers(agent.pid)
        victim = psutil.Process(before[1]) if before[1] is not None else None
        if victim is None:
            raise RuntimeError("torchrun has no worker of rank 1 to hang")
        victim.suspend()
        struck = time.time()
        restarted: float | None = None
        while time.time() - struck < limit and agent.poll() is None:
            if restarted is None:
                now = _workers(agent.pid)
                if any(pid is not None and pid != before[r] for r, pid in now.items()):
                    restarted = time.time()
                    figures["decision"] = restarted - struck
            elif after := [r["time"] for r in steps_of(workdir) if r["time"] > restarted]:
                figures["training_again"] = min(after) - struck
                break
            time.sleep(0.2)
    finally:
        torchrun.stop(agent)
        if victim is not None and victim.is_running():
            victim.kill()
    return figures


def ready(node: k8s.V1Node) -> bool:
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def node_ready_seconds(count: int, workdir: Path) -> list[float]:
    """Kubernetes' own detection of lost nodes: `count` kwok nodes stop posting status, one
    after another over one monitor period, under the real node lifecycle controller at its
    defaults; seconds from each stop until that node's Ready condition is no longer True."""
    with running_control_plane(workdir, controllers=NODE_CONTROLLERS) as plane, \
         kwok.scheduler_and_kwok(plane, workdir):  # fmt: skip
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(plane.kubeconfig)))
        names = kwok.add_nodes(core, count)
        wait_until(lambda: all(ready(n) for n in core.list_node().items), 60, "kwok nodes Ready")
        stopped: dict[str, float] = {}
        for name in names:  # spread over one monitor period: each lands at another phase of it
            kwok.stop_playing(core, [name])
            stopped[name] = time.monotonic()
            time.sleep(NODE_MONITOR_PERIOD_SECONDS / count)
        found: dict[str, float] = {}

        def all_lost() -> bool:
            for node in core.list_node().items:
                name = str(node.metadata.name)
                if name not in found and not ready(node):
                    found[name] = time.monotonic() - stopped[name]
            return len(found) == count

        wait_until(all_lost, 4 * NODE_MONITOR_GRACE_SECONDS, "the lost nodes NotReady", 0.2)
        return sorted(found.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=10, help="faults of each kind")
    parser.add_argument("--nodes", type=int, default=5,
                        help="kwok nodes stopped, one after another, for Kubernetes' NodeReady baseline")  # fmt: skip
    parser.add_argument("--torch-hang-limit", type=float, default=480.0,
                        help="seconds the torchrun hang baseline may run")  # fmt: skip
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args()
    figures: dict[str, Any] = {"scenarios": {}}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        node_ready = node_ready_seconds(args.nodes, Path(tmp, "nodeready"))
        print("NodeReady", [round(s, 1) for s in node_ready], flush=True)
        for name, (what, kind, spares) in SCENARIOS.items():
            seconds = decisions(args.faults, kind, spares, Path(tmp, name))
            print(name, [round(s, 2) for s in seconds], flush=True)
            figures["scenarios"][name] = {
                "what": what, "seconds": seconds,
                "median": stats.median(seconds) if seconds else None,
            }  # fmt: skip
        hang = torchrun_hang(Path(tmp, "torchrun-hang"), args.torch_hang_limit)
        print("torchrun hang", hang, flush=True)
    figures["torchrun_hang"] = hang
    figures["node_ready_seconds"] = node_ready
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
