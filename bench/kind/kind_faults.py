"""The kind suite's fault matrix (the reference trainer), for the benchmark report.

`tests/e2e/test_faults.py` records, per fault, the seconds from the fault to the operator's
decision and to the first training step after it, the failures and events, and, for a silent
node, when Kubernetes marked the node NotReady on the same cluster in the same run.
`python -m bench.kind.kind_faults` keeps that run's records in bench/results/kind/faults.jsonl with the
commit they ran at; `python -m bench.report` renders them. Kind figures: real pods on this
machine's kind cluster (its node-monitor grace period is 20 s unless `PHALANX_KIND_NODE_GRACE`
says otherwise, `tests/tools/kind.sh`; each record says which), not comparable with the local
backend's tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.kind import kind_figures

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "build" / "test-artifacts" / "e2e-recovery.jsonl"
KEPT = ROOT / "bench" / "results" / "kind" / "faults.jsonl"
CASES = {
    "worker-killed": "a worker SIGKILLed",
    "pod-deleted": "a pod deleted (graceful: SIGTERM)",
    "pod-preempted": "a pod preempted by the scheduler for a higher-priority pod",
    "node-lost": "a node lost (its container killed), no spare",
    "node-lost-spare": "a node lost, `spares: 1`",
    "silent-node-spare": "a node frozen (`docker pause`), `spares: 1`, default failure policy",
    "partition-spare": "every packet between node ranks 0 and 1 dropped, `spares: 1`, default "
    "failure policy",
    "rank-hung": "a rank SIGSTOPped, `hangTimeoutSeconds: 10`",
    "rank-hung-default": "a rank SIGSTOPped, default failure policy (its agent's stopped-worker "
    "check, 10 s)",
    "rank-stalled-default": "a rank stalled while alive (ptrace-held), default failure policy "
    "(the adaptive step-hang timeout, 30 s here)",
    "slow-rank": "a rank's pod cut to a tenth of a CPU (its cgroup's CFS quota), steps of real "
    "compute",
    "oom-killed": "a worker past its pod's memory limit (a user's script)",
    "checkpoint-corrupt": "a worker SIGKILLed with a corrupt and a partial checkpoint newest on "
    "the volume",
    "volume-full": "the checkpoint volume full (a 1.5 MiB tmpfs)",
    "budget-exhausted": "a program that always exits 1, `maxRestarts: 2` (decision: the third "
    "failure to Failed)",
    "apiserver-restarted": "the kube-apiserver stopped and started again",
    "operator-killed": "the operator's pod deleted (grace period 0)",
    "image-missing": "an image that cannot be pulled (decision: the job created to its condition)",
}


def collect(source: Path = SOURCE, kept: Path = KEPT) -> list[dict[str, Any]]:
    """The fault-matrix records of the run in `source`, added to `kept` with the commit."""
    return kind_figures.append_cases(source, kept, CASES)


def load(kept: Path = KEPT) -> list[dict[str, Any]]:
    return kind_figures.load(kept)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def section(records: list[dict[str, Any]]) -> list[str]:
    """The report's section: the newest record of each case, in the matrix's order."""
    newest = {r["case"]: r for r in records}
    # A frozen node's row at the suite's grace period and at Kubernetes' default are two rows.
    newest_by_grace = {(r["case"], r.get("node_monitor_grace_s") or 20.0): r for r in records}
    lines = [
        "## Faults on kind: the reference trainer",
        "",
        "Measured by `make e2e` (`tests/e2e/test_faults.py`, `test_cluster_faults.py`, and "
        "`test_jobs.py` for the image) on this machine's kind cluster "
        "(Kubernetes v1.33.13, 3 worker nodes; its node-monitor grace period is the suite's 20 s "
        "unless the row names Kubernetes' default, 50 s), at the commits shown. Decision: the operator's record of the failure; training again: the trainer's "
        "first step after its resume, from its step log; NodeReady: when Kubernetes marked a "
        "frozen node NotReady, on the same cluster in the same run. Restarts: the job's "
        "Restart events for the one fault. Resumed from: the checkpoint's step, and for a "
        "graceful stop the steps trained after it (redone).",
        "",
        "| fault | found as | restarts | fault to decision | fault to training again | "
        "resumed from | node NotReady | commit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = [
        _row(what + _grace(grace), r)
        for case, what in CASES.items()
        for (_, grace), r in sorted(
            ((key, r) for key, r in newest_by_grace.items() if key[0] == case),
            key=lambda item: item[0][1],
        )
    ]
    ridden = [
        f"{what}: {_outage(newest[case])}"
        for case, what in CASES.items()
        if case in newest and newest[case].get("fault_to_decision_s") is None
        and not newest[case].get("found_as")
    ]  # fmt: skip
    notes = (
        ["", "Faults ridden out (no decision to make, no restart; training again: the first "
         "step after the fault): " + "; ".join(ridden) + "."] if ridden else []
    )  # fmt: skip
    return [*lines, *rows, *notes, ""]


def _grace(grace: float) -> str:
    """A row's node-monitor grace period, where a record names Kubernetes' default."""
    return f", node-monitor grace period {grace:.0f} s (Kubernetes' default)" if grace >= 40 else ""


def _outage(r: dict[str, Any]) -> str:
    if "outage_s" in r:
        return f"serving again after {r['outage_s']:.1f} s"
    if "operator_back_s" in r:
        return f"a new operator Running after {r['operator_back_s']:.1f} s"
    return "ridden out"


def _row(what: str, r: dict[str, Any]) -> str:
    """One fault's row: what found it, the restarts it cost, and its seconds."""
    found = r.get("found_as") or ", ".join(r.get("failures") or []) or "none (ridden out)"
    restarts = (r.get("events") or []).count("Restart")
    resumed = str(r.get("resumed_from_step", "-"))
    if "steps_redone" in r:
        resumed += f" ({r['steps_redone']} redone)"
    not_ready = _seconds(r.get("node_not_ready_s"))
    if r.get("node_not_ready_s") is not None:
        grace = r.get("node_monitor_grace_s")
        not_ready += f" (grace period {grace:.0f} s)" if grace else " (grace period 20 s)"
    return (
        f"| {what} | {found} | {restarts} | {_seconds(r.get('fault_to_decision_s'))} | "
        f"{_seconds(r.get('fault_to_first_step_s'))} | {resumed} | {not_ready} | "
        f"{r['commit']} |"
    )


if __name__ == "__main__":
    raise SystemExit(kind_figures.cli(__doc__.splitlines()[0], collect, SOURCE, KEPT))
