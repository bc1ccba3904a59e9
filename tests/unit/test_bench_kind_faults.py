"""The report's section of the kind fault matrix.

Covers: only the matrix's cases are kept, with the commit they ran at; the section shows the
newest record of each case in the matrix's order, with how it was found, its restart count,
fault to decision and to training again, and the node's NotReady time where measured.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.kind import kind_faults


def _record(case: str, decided: float, trained: float, **more: object) -> dict[str, object]:
    return {"case": case, "fault_to_decision_s": decided, "fault_to_first_step_s": trained,
            "failures": ["PeerSilent"], "events": ["Started", "Restart", "Recovered"], **more}  # fmt: skip


def test_only_the_matrix_cases_are_kept_with_their_commit(tmp_path: Path) -> None:
    source, kept = tmp_path / "e2e-recovery.jsonl", tmp_path / "kind" / "faults.jsonl"
    records: list[dict[str, object]] = [
        _record("node-lost", 2.5, 3.9),
        {"case": "user-image-x.py-worker-killed"},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True, cwd=kind_faults.ROOT).stdout.strip()  # fmt: skip
    assert kind_faults.collect(source, kept) == [{**records[0], "commit": commit}]
    assert kind_faults.load(kept) == [{**records[0], "commit": commit}]
    assert kind_faults.load(tmp_path / "absent.jsonl") == []


def test_the_section_shows_each_cases_newest_record_in_the_matrix_order() -> None:
    records = [
        _record("silent-node-spare", 9.0, 12.0, node_not_ready_s=30.0, commit="a"),
        _record(
            "silent-node-spare",
            4.6,
            6.1,
            node_not_ready_s=24.3,
            commit="b",
            node_monitor_grace_s=50.0,
        ),
        _record("node-lost", 2.5, 3.9, commit="b", resumed_from_step=10),
        _record("pod-preempted", 0.4, 6.2, commit="b", resumed_from_step=19, steps_redone=0),
    ]
    rows = [line for line in kind_faults.section(records) if line.startswith("| a ")]
    assert rows == [
        "| a pod preempted by the scheduler for a higher-priority pod | PeerSilent | 1 | 0.4 s "
        "| 6.2 s | 19 (0 redone) | - | b |",
        "| a node lost (its container killed), no spare | PeerSilent | 1 | 2.5 s | 3.9 s | 10 | - "
        "| b |",
        "| a node frozen (`docker pause`), `spares: 1`, default failure policy | PeerSilent | 1 "
        "| 9.0 s | 12.0 s | - | 30.0 s (grace period 20 s) | a |",
        "| a node frozen (`docker pause`), `spares: 1`, default failure policy, node-monitor grace "
        "period 50 s (Kubernetes' default) | PeerSilent | 1 | 4.6 s | 6.1 s | - | 24.3 s (grace "
        "period 50 s) | b |",
    ], "the suite's grace period and Kubernetes' default are a row each"
    older = [line for line in kind_faults.section(records[:1]) if line.startswith("| a ")]
    assert older[0].endswith("| 30.0 s (grace period 20 s) | a |"), "recorded before it was named"


def test_a_fault_ridden_out_shows_no_decision_and_says_how_long_the_outage_was() -> None:
    ridden = {"case": "apiserver-restarted", "fault_to_decision_s": None,
              "fault_to_first_step_s": 0.4, "failures": [], "events": ["Started", "Succeeded"],
              "outage_s": 38.2, "commit": "c"}  # fmt: skip
    full = {**_record("volume-full", 1.1, 0.2, commit="c"), "failures": [],
            "events": ["Started", "CheckpointFailed"], "found_as": "CheckpointFailing"}  # fmt: skip
    section = kind_faults.section([ridden, full])
    assert "| the kube-apiserver stopped and started again | none (ridden out) | 0 | - | 0.4 s " \
        "| - | - | c |" in section  # fmt: skip
    assert "| the checkpoint volume full (a 1.5 MiB tmpfs) | CheckpointFailing | 0 | 1.1 s " \
        "| 0.2 s | - | - | c |" in section  # fmt: skip
    [note] = [line for line in section if line.startswith("Faults ridden out")]
    assert "the kube-apiserver stopped and started again: serving again after 38.2 s" in note
    assert "volume full" not in note, "a fault with a decision is not ridden out"
