"""What the kind suite measured of sharing a cluster: Kueue's admission and preemption, and a
node drained under a job, for the benchmark report.

`tests/e2e/test_kueue.py`, `test_gang.py` and `test_disruptions.py` record, per case, the seconds from
the cluster's decision (Kueue admits or evicts the job's Workload, `kubectl drain` starts) to the
job's answer (its first training step, its pods all gone, its first step on the spare).
`python -m bench.kind.kind_scheduling` keeps that run's records in bench/results/kind/scheduling.jsonl
with the commit they ran at; `python -m bench.report` renders them. Kind figures: real pods and
Kueue v0.17.0's controller on this machine's kind cluster, not comparable with the local
backend's tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.kind import kind_figures

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "build" / "test-artifacts" / "e2e-recovery.jsonl"
KEPT = ROOT / "bench" / "results" / "kind" / "scheduling.jsonl"
CASES = {
    "kueue-admitted-full": ("one of two elastic jobs (min 2, max 4) in a 6-pod quota, admitted "
                            "at 4", "admission to training", "admission_to_first_step_s"),
    "kueue-admitted-partial": ("the other, admitted partially at 2 (what was left)",
                               "admission to training", "admission_to_first_step_s"),
    "kueue-grow-admitted": ("the one at 2 asks Kueue to grow (a Workload of its own); the "
                            "other deleted", "deletion to its request admitted at 4",
                            "freed_to_admitted_s"),
    "kueue-grown": ("the same job grows into that admission (standby pods made and started, "
                    "a planned resize; its grow cooldown already past)",
                    "admission to training at 4 nodes",
                    "admitted_to_training_s"),
    "kueue-preempted": ("an elastic job preempted by a higher-priority one",
                        "eviction to stopped (its step saved)", "eviction_to_stopped_s"),
    "kueue-pod-replaced": ("a queued job's pod deleted (Kueue's waitForPodsReady watching)",
                           "deletion to training again, the replacement beside its peers",
                           "fault_to_first_step_s"),
    "gang-pod-replaced": ("`gang: true` (the test's coscheduling scheduler): a pod deleted",
                          "deletion to training again, the replacement in its peers' PodGroup",
                          "fault_to_first_step_s"),
    "node-drained-spare": ("`kubectl drain` of a node running a rank, `spares: 1`",
                           "drain to training again on the spare", "fault_to_first_step_s"),
}  # fmt: skip


def collect(source: Path = SOURCE, kept: Path = KEPT) -> list[dict[str, Any]]:
    """This run's records of the cases above, added to `kept` with the commit."""
    return kind_figures.append_cases(source, kept, CASES)


def load(kept: Path = KEPT) -> list[dict[str, Any]]:
    return kind_figures.load(kept)


def section(records: list[dict[str, Any]]) -> list[str]:
    """The report's section: the newest record of each case."""
    newest = {r["case"]: r for r in records}
    lines = [
        "## Sharing the cluster on kind: Kueue and drains",
        "",
        "Measured by `make e2e` (`tests/e2e/test_kueue.py`, `test_gang.py`, "
        "`test_disruptions.py`) on "
        "this machine's kind cluster (Kubernetes v1.33.13, 3 worker nodes, Kueue v0.17.0 built "
        "from its Go module, waitForPodsReady 120 s), at the commits shown. The start is the "
        "cluster's own record (the Workload's Admitted or Evicted condition) or the moment the "
        "test ran `kubectl drain`; the end is the trainer's first step from its step log, or "
        "the moment the test saw the job's last pod gone. Steps redone: trained before the stop "
        "but not in the checkpoint the job resumed from. Admission to training is the job's "
        "whole cold start (its pods made, scheduled and started, torch imported, the gang's "
        "rendezvous, the first step), not a wait on Kueue; it is not broken down here.",
        "",
        "| case | figure | seconds | steps redone | failures recorded | commit |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case, (what, figure, key) in CASES.items():
        if (r := newest.get(case)) is None or r.get(key) is None:
            continue
        redone = str(r["steps_redone"]) if "steps_redone" in r else "-"
        failures = (", ".join(r["failures"]) or "none") if "failures" in r else "-"
        lines.append(
            f"| {what} | {figure} | {r[key]:.1f} s | {redone} | {failures} | {r['commit']} |"
        )
    return [*lines, ""]


if __name__ == "__main__":
    raise SystemExit(kind_figures.cli(__doc__.splitlines()[0], collect, SOURCE, KEPT))
