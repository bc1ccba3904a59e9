"""`phalanx.progress`, the API any script calls: what it writes is a heartbeat the operator reads.

Without torch.distributed initialised (these tests), `sync_ranks` gathers this process alone.
The gather across real ranks runs in every reference-trainer test (the trainer reports through
the same `Reporter`).
"""

from __future__ import annotations

import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from phalanx import progress
from phalanx.models import env
from phalanx.models.heartbeat import Heartbeat


def test_its_variable_names_are_the_contracts() -> None:
    assert progress.PROGRESS_FILE_ENV == env.PHALANX_PROGRESS_FILE
    assert progress.PHASE_FILE_ENV == env.PHALANX_PHASE_FILE
    assert progress.EPOCH_ENV == env.PHALANX_EPOCH
    assert progress.RANK_ENV == env.RANK


def test_it_imports_nothing_outside_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import phalanx.progress; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(new & {'torch', 'pydantic', 'numpy', 'yaml'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_report_is_a_heartbeat_with_compute_times(tmp_path: Path) -> None:
    reporter = progress.Reporter(tmp_path / "progress.json", epoch=3)
    for step in range(1, 11):
        with reporter.compute():
            time.sleep(0.002)
        reporter.report(step, loss=1.0 / step, samples=8, sync_ranks=True)
    reporter.checkpoint(10, str(tmp_path / "step-10"))
    reporter.report(11, loss=0.05)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert (beat.epoch, beat.step, beat.loss) == (3, 11, 0.05)
    assert beat.window_steps == 10
    [step_seconds] = beat.rank_step_seconds
    [compute_seconds] = beat.rank_compute_seconds
    assert 0.002 <= compute_seconds <= step_seconds
    assert beat.checkpoint is not None
    assert (beat.checkpoint.step, beat.checkpoint.path) == (10, str(tmp_path / "step-10"))


def test_reports_without_compute_times_leave_them_out(tmp_path: Path) -> None:
    reporter = progress.Reporter(tmp_path / "progress.json")
    reporter.report(1, sync_ranks=True)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert beat.rank_compute_seconds == []
    assert len(beat.rank_step_seconds) == 1


def test_only_global_rank_0_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.RANK, "1")
    progress.Reporter(tmp_path / "progress.json").report(1, loss=1.0)
    assert not (tmp_path / "progress.json").exists()


def test_the_first_report_enters_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env.PHALANX_PHASE_FILE, str(tmp_path / "phase"))
    reporter = progress.Reporter(tmp_path / "progress.json")
    progress.phase("loading")
    assert (tmp_path / "phase").read_text() == "loading"
    reporter.report(1)
    assert (tmp_path / "phase").read_text() == "training"


def test_outside_a_phalanx_pod_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (env.PHALANX_PROGRESS_FILE, env.PHALANX_PHASE_FILE):
        monkeypatch.delenv(name, raising=False)
    reporter = progress.Reporter()
    assert reporter.path is None
    reporter.report(1, loss=1.0)
    progress.phase("training")


def test_an_unknown_phase_is_refused_naming_the_phases() -> None:
    with pytest.raises(ValueError, match="rendezvous, loading, first-step, training"):
        progress.phase("warming-up")


def test_a_checkpoint_shows_in_the_heartbeat_at_once(tmp_path: Path) -> None:
    """A script may save at its last step and exit: the checkpoint must not wait for a report."""
    reporter = progress.Reporter(tmp_path / "progress.json", epoch=1)
    reporter.checkpoint(0, str(tmp_path / "step-0"))
    assert not (tmp_path / "progress.json").exists(), "no step yet: no heartbeat made up"
    reporter.report(20, loss=0.5)
    reporter.checkpoint(20, str(tmp_path / "step-20"))
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert (beat.step, beat.loss) == (20, 0.5)
    assert beat.checkpoint is not None
    assert (beat.checkpoint.step, beat.checkpoint.path) == (20, str(tmp_path / "step-20"))


def test_a_blocking_save_shows_in_the_heartbeat_while_it_runs(tmp_path: Path) -> None:
    """The operator allows a save longer than a step only while the heartbeat says one runs;
    nested blocks (a finish that saves and closes) are the outer one."""
    reporter = progress.Reporter(tmp_path / "progress.json", epoch=1)
    reporter.report(20, loss=0.5)

    def beat() -> Heartbeat:
        return Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())

    with reporter.saving(20):
        during = beat()
        with reporter.saving(21):
            assert beat().saving == during.saving, "the inner block is the outer save"
    assert during.saving is not None
    assert during.saving.step == 20
    after = beat()
    assert after.saving is None, "cleared once the save is done"
    assert after.saved_at is not None, "the save's end goes out at once"
    assert after.saved_at >= during.saving.since, "the hang timeout counts again from it"
    reporter.saved(12.3456)
    reporter.report(21, loss=0.4)
    assert beat().save_seconds == 12.346, "the last save's time goes out with the next report"


def test_a_report_carries_the_total_and_rank_0s_step_time_after_its_first_step(
    tmp_path: Path,
) -> None:
    """The first step's time includes the script's start-up: it is left out of `stepSeconds`."""
    reporter = progress.Reporter(tmp_path / "progress.json")
    time.sleep(0.2)  # start-up
    reporter.report(1, total_steps=50)
    first = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert (first.total_steps, first.step_seconds) == (50, None)
    for step in range(2, 5):
        time.sleep(0.01)
        reporter.report(step, total_steps=50)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert beat.total_steps == 50
    assert beat.step_seconds is not None
    assert 0.01 <= beat.step_seconds < 0.2


class FakeEvent:
    """FAKE (no GPU here): a CUDA event whose timing says the kernels ran 250 ms."""

    def __init__(self, enable_timing: bool) -> None:
        assert enable_timing

    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: FakeEvent) -> float:
        return 250.0


def reporter_with_fake_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, cuda_initialized: bool
) -> progress.Reporter:
    """FAKE torch in sys.modules: CUDA available, initialised by this process or not."""
    cuda = types.SimpleNamespace(is_available=lambda: True,
                                 is_initialized=lambda: cuda_initialized, Event=FakeEvent)  # fmt: skip
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    return progress.Reporter(tmp_path / "progress.json")


def test_on_a_gpu_compute_is_timed_by_cuda_events_not_the_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block that only launches kernels returns at once; its CUDA events time the kernels.
    (FAKE torch: no GPU on this machine; the real check is tests/gpu/test_cuda_timing.py.)"""
    reporter = reporter_with_fake_torch(tmp_path, monkeypatch, cuda_initialized=True)
    with reporter.compute():
        pass  # launches, returns at once
    reporter.report(1, sync_ranks=True)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    assert beat.rank_compute_seconds == [0.25]


def test_a_cpu_program_is_timed_by_the_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reporter = reporter_with_fake_torch(tmp_path, monkeypatch, cuda_initialized=False)
    with reporter.compute():
        time.sleep(0.02)
    reporter.report(1, sync_ranks=True)
    beat = Heartbeat.model_validate_json((tmp_path / "progress.json").read_text())
    [seconds] = beat.rank_compute_seconds
    assert 0.02 <= seconds < 0.25, "CUDA never initialised here: not a GPU program"
