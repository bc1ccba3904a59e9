"""The report's section of kind figures for user images.

Covers: only user-image records are kept, with the commit they ran at; the section shows, for
each program and fault, the newest measurement, with its image, fault, figure and failures.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.kind import kind_figures


def _record(case: str, job: str, fault: str, seconds: float) -> dict[str, object]:
    return {"case": case, "image": "phalanx/user-python:0.1.0", "job": job, "fault": fault,
            "fault_to_first_step_s": seconds, "resumed_from_step": 20,
            "failures": ["Hang"]}  # fmt: skip


def test_only_user_image_records_are_kept_with_their_commit(tmp_path: Path) -> None:
    source, kept = tmp_path / "e2e-recovery.jsonl", tmp_path / "kind" / "any-image.jsonl"
    records = [_record("user-image-x-rank-stopped", "x.py", "rank-stopped", 10.5),
               {"case": "node-lost", "fault_to_first_step_s": 3.0}]  # fmt: skip
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True, cwd=kind_figures.ROOT).stdout.strip()  # fmt: skip
    assert kind_figures.collect(source, kept) == [{**records[0], "commit": commit}]
    assert kind_figures.load(kept) == [{**records[0], "commit": commit}]
    assert kind_figures.load(tmp_path / "absent.jsonl") == []


def test_the_section_shows_the_newest_figure_of_each_program_and_fault() -> None:
    old = _record("user-image-x-rank-stopped", "x.py", "rank-stopped", 99.0) | {"commit": "a"}
    new = _record("user-image-x-rank-stopped", "x.py", "rank-stopped", 10.5) | {"commit": "b"}
    spare = _record("user-image-x-node-lost-spare", "x.py", "node-lost-spare", 4.25) | {
        "commit": "b"
    }
    rows = [line for line in kind_figures.section([old, new, spare]) if line.startswith("| x.py")]
    assert rows == [
        "| x.py | `phalanx/user-python:0.1.0` | a node lost, `spares: 1` | 4.25 s | 20 | Hang | b |",
        "| x.py | `phalanx/user-python:0.1.0` | a rank SIGSTOPped | 10.50 s | 20 | Hang | b |",
    ]
