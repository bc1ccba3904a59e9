"""Detection: a fault to the planner's decision about it, on the local backend, for a worker
process that crashes, a node that is lost, and a node that hangs (SIGSTOP, every process of the
pod frozen), beside what a job without Phalanx waits for.

Why the decision: it is the end of detection (the restart is recovery, measured by
`bench.recovery`). A fault's decision is the first Restart, Shrink or Hang event after it.
Baselines: a hung collective ends only at the process group's timeout, read from this torch
(`torch.distributed.constants`); a lost node is noticed by Kubernetes when its NodeReady
condition goes Unknown, after the controller manager's node-monitor-grace-period (the value of
the Kubernetes version pinned here; the kind e2e suite sees it end-to-end).

Usage: python -m bench.detection [--faults 10] --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from torch.distributed import constants

from bench.goodput import job
from bench.recovery import Injector
from phalanx.local import LocalRun, RunOptions
from phalanx.models.events import EventReason

DECISIONS = {EventReason.RESTART, EventReason.SHRINK, EventReason.HANG}
NODE_MONITOR_GRACE_SECONDS = 50.0
"""kube-controller-manager's --node-monitor-grace-period default in Kubernetes v1.33 (50 s
since v1.32): a node whose kubelet stops reporting is NotReady (Unknown) after this."""
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=10, help="faults of each kind")
    parser.add_argument("--json", type=Path, required=True, help="where to write the figures")
    args = parser.parse_args()
    figures: dict[str, Any] = {"scenarios": {}}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
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
        "node": ("a lost node: Kubernetes marks it NotReady after node-monitor-grace-period",
                 NODE_MONITOR_GRACE_SECONDS),
    }  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
