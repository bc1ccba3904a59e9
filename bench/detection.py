"""Detection: a fault to the planner's decision about it, on the local backend, for a worker
process that crashes, a node that is lost, and a node that hangs (SIGSTOP, every process of the
pod frozen), beside what a job without Phalanx waits for.

Why the decision: it is the end of detection (the restart is recovery, measured by
`bench.recovery`). A fault's decision is the first Restart, Shrink or Hang event after it.
Baselines: a hung collective ends only at the process group's timeout, read from this torch
(`torch.distributed.constants`); a lost node is noticed by Kubernetes when its NodeReady
condition goes Unknown, measured here: kwok nodes whose kubelet stops (kwok no longer plays
them) on the project's API server, with the real node lifecycle controller at its defaults
(node-monitor-grace-period 50 s, node-monitor-period 5 s in v1.33), timed to the moment their
Ready condition is no longer True.

Usage: python -m bench.detection [--faults 10] [--nodes 5] --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from torch.distributed import constants

from bench import kwok
from bench.goodput import job
from bench.recovery import Injector
from phalanx.local import LocalRun, RunOptions
from phalanx.models.events import EventReason
from tests.support.controlplane import ControlPlane, running_control_plane, wait_until

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
    "hang": ("a node hung (SIGSTOP)", "hang", 0),
}


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
                "median": statistics.median(seconds) if seconds else None,
            }  # fmt: skip
    figures["baselines"] = {
        "hang": ("a hung collective: torch's default process-group timeout (gloo; NCCL "
                 f"{constants.default_pg_nccl_timeout.total_seconds():.0f} s)",
                 constants.default_pg_timeout.total_seconds()),
        "node": (f"a lost node: Kubernetes' node lifecycle controller marks it NotReady "
                 f"(measured, median of {len(node_ready)} nodes; its grace period is "
                 f"{NODE_MONITOR_GRACE_SECONDS:.0f} s)", statistics.median(node_ready)),
    }  # fmt: skip
    figures["node_ready_seconds"] = node_ready
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
