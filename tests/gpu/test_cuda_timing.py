"""On a real GPU (`make test-gpu`; left out where there is none): a compute block that launches
a second of matrix products returns at once, and the straggler timing still sees the second,
from CUDA events; the wall clock around the block would have seen the launch only."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from phalanx import progress
from phalanx.models.heartbeat import Heartbeat


@pytest.mark.gpu
def test_compute_on_the_gpu_is_timed_by_its_kernels(tmp_path: Path) -> None:
    assert torch.cuda.is_available(), "make test-gpu runs where a GPU is"
    a = torch.randn(8192, 8192, device="cuda")
    (a @ a).norm()  # cuBLAS starts up on the host (0.2 s on an H100): not part of what is timed
    torch.cuda.synchronize()
    reporter = progress.Reporter(tmp_path / "progress.json")
    started = time.monotonic()
    with reporter.compute():
        for _ in range(20):
            a = a @ a
            a = a / a.norm()
    launched = time.monotonic() - started
    reporter.report(1, sync_ranks=True)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    [seconds] = beat.rank_compute_seconds
    assert seconds > 5 * launched, (seconds, launched)
