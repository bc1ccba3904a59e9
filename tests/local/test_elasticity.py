"""Shrink and grow back on a local cluster whose capacity changes.

Covers: `--capacity 3 --capacity-schedule 30s=4` with min 2 / max 4 shrinks to 3 nodes, grows
back to 4 once capacity returns at 30 s, finishes, and its loss trajectory matches an
uninterrupted run at every step (the trainer's trajectory check).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.support.gang import kept_trajectory, records
from tests.support.local import event_reasons, manifest, phalanx

STEPS = 400  # >= 40 s of steps (0.1 s delay each): still training when capacity returns


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_capacity_shrinks_then_grows_back_and_the_trajectory_is_unchanged(tmp_path: Path) -> None:
    job = manifest(tmp_path, replicas={"min": 2, "max": 4}, trainer={"steps": STEPS})
    reference = phalanx("run", str(job), "--workdir", str(tmp_path / "reference"), "-o", "json")
    assert reference.code == 0, reference.stderr[-4000:]
    assert reference.summary["restarts"]["total"] == 0

    elastic = phalanx(
        "run", str(job), "--workdir", str(tmp_path / "elastic"), "-o", "json",
        "--capacity", "3", "--capacity-schedule", "30s=4",
    )  # fmt: skip
    assert elastic.code == 0, elastic.stderr[-4000:]
    summary = elastic.summary
    assert summary["phase"] == "Succeeded"
    assert summary["worldSize"] == 4
    events = summary["events"]
    reasons = event_reasons(summary)
    assert reasons.index("Shrink") < reasons.index("Capacity") < reasons.index("Grow")
    shrink = next(e for e in events if e["reason"] == "Shrink")
    assert "3 nodes" in shrink["message"]
    started = _time(events[0]["time"])
    grown = _time(next(e for e in events if e["reason"] == "Grow")["time"]) - started
    assert grown.total_seconds() >= 30, f"grew back {grown.total_seconds():.1f} s in, too soon"

    expected, _ = kept_trajectory(tmp_path / "reference")
    resized, _ = kept_trajectory(tmp_path / "elastic")
    assert sorted(expected) == sorted(resized) == list(range(1, STEPS + 1))
    worst = max(abs(expected[s] - resized[s]) for s in expected)
    assert worst <= 1e-4, f"largest loss difference {worst:.2e}"
    worlds = {r["world"] for r in _losses(tmp_path / "elastic")}
    assert worlds == {3, 4}, f"trained at world sizes {worlds}"


def _losses(workdir: Path) -> list[dict[str, object]]:
    return [r for r in records(workdir) if "loss" in r]
