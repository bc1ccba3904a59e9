"""The report's section of sharing the cluster on kind (Kueue, drains).

Covers: only its cases are kept, with the commit; the section shows each case's newest record
with its own figure, the steps redone and the failures ("-" where the record has none to say);
a record without its figure is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.kind import kind_scheduling


def test_only_its_cases_are_kept_and_the_newest_of_each_is_shown(tmp_path: Path) -> None:
    source, kept = tmp_path / "e2e-recovery.jsonl", tmp_path / "kind" / "scheduling.jsonl"
    records: list[dict[str, object]] = [
        {"case": "kueue-preempted", "eviction_to_stopped_s": 9.0, "steps_redone": 0},
        {"case": "node-lost", "fault_to_first_step_s": 3.0},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    [kept_record] = kind_scheduling.collect(source, kept)
    assert kept_record["case"] == "kueue-preempted"
    newer = {"case": "kueue-preempted", "eviction_to_stopped_s": 4.25, "steps_redone": 0,
             "failures": [], "commit": "b"}  # fmt: skip
    replaced = {"case": "kueue-pod-replaced", "fault_to_first_step_s": 8.0, "commit": "b"}
    drained = {"case": "node-drained-spare", "fault_to_first_step_s": 7.0, "steps_redone": 0,
               "failures": [], "commit": "b"}  # fmt: skip
    unmeasured: dict[str, object] = {"case": "kueue-admitted-full", "commit": "b"}
    records = [*kind_scheduling.load(kept), newer, drained, unmeasured, replaced]
    rows = [
        line
        for line in kind_scheduling.section(records)
        if line.startswith("| ") and not line.startswith("| case") and "---" not in line
    ]
    assert rows == [
        "| an elastic job preempted by a higher-priority one | eviction to stopped (its step "
        "saved) | 4.2 s | 0 | none | b |",
        "| a queued job's pod deleted (Kueue's waitForPodsReady watching) | deletion to training "
        "again, the replacement beside its peers | 8.0 s | - | - | b |",
        "| `kubectl drain` of a node running a rank, `spares: 1` | drain to training again on "
        "the spare | 7.0 s | 0 | none | b |",
    ]
