"""The chaos soak (tests/e2e/soak.py) as a test: `make soak MINUTES=N` runs it and writes its
report to docs/soak.md; it fails when any invariant broke. Marked `soak`: `make e2e` leaves it
out (it takes N minutes and more)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e import soak, soak_report
from tests.e2e.cluster import ARTIFACTS, KindCluster

MINUTES = float(os.environ.get("PHALANX_SOAK_MINUTES", "30"))
SEED = int(os.environ.get("PHALANX_SOAK_SEED", "1"))


@pytest.mark.soak
@pytest.mark.timeout(int(MINUTES * 60 + 1800))
def test_a_job_under_random_faults_keeps_every_invariant(
    kind: KindCluster, namespace: str, tmp_path: Path
) -> None:
    result = soak.run(kind, namespace, MINUTES, SEED, tmp_path / "reference")
    text = soak_report.render(result, SEED, kind.node_monitor_grace_seconds())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "soak.md").write_text(text)
    (ARTIFACTS / "soak.json").write_text(json.dumps(result.figures(), indent=1))
    if target := os.environ.get("PHALANX_SOAK_REPORT"):
        Path(target).write_text(text)
    print(text)
    assert result.struck, "no fault struck"
    assert not result.broken, "\n".join(result.broken)
