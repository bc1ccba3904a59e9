"""The checkpoint manager never resumes from a partial checkpoint and never loses the last good one.

Covers: a missing `.metadata` or a truncated shard in the newest directory makes resume use the
previous one; a full disk (a small tmpfs) fails the save loudly and leaves the previous checkpoint
intact; pruning keeps the newest K and never the newest valid; async saves commit on wait (and are
reported then, not when they start) and save the
state as it was at the save, though it changes once the staging is done; an fsspec URL works
like a directory. One rank, in a real (single-member) gloo process group;
the multi-rank and resharding paths are exercised by the trajectory test.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from phalanx.resume.checkpoint import METADATA, CheckpointManager, CheckpointSaveError
from tests.support.disks import small_tmpfs


@pytest.fixture(autouse=True)
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


def state(value: float, size: int = 64) -> dict[str, object]:
    return {"app": {"weights": torch.full((size,), value), "bias": torch.tensor([value])}}


def loaded(manager: CheckpointManager, size: int = 64) -> tuple[int | None, float]:
    target = state(-1.0, size)
    step = manager.load_latest(target)
    return step, float(target["app"]["weights"][0])  # type: ignore[index]


def test_resume_skips_a_directory_without_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = CheckpointManager(str(tmp_path), keep=5, async_save=False)
    manager.save(10, state(1.0))
    manager.save(20, state(2.0))
    (tmp_path / "step-20" / METADATA).unlink()
    with caplog.at_level(logging.WARNING):
        assert loaded(manager) == (10, 1.0)
    assert "step-20: no .metadata" in caplog.text


def test_resume_skips_a_truncated_shard(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    manager = CheckpointManager(str(tmp_path), keep=5, async_save=False)
    manager.save(10, state(1.0))
    manager.save(20, state(2.0))
    shard = next((tmp_path / "step-20").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 3])
    with caplog.at_level(logging.WARNING):
        assert loaded(manager) == (10, 1.0)
    assert "step-20 is unreadable" in caplog.text


def test_nothing_to_resume_from(tmp_path: Path) -> None:
    assert loaded(CheckpointManager(str(tmp_path / "empty"))) == (None, -1.0)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a checkpoint of 4 MiB cannot fit (needs root, as CI has)."""
    with small_tmpfs(tmp_path / "disk", "2m") as mount:
        yield mount


def save_and_commit(manager: CheckpointManager, step: int, value: dict[str, object]) -> None:
    manager.save(step, value)
    manager.wait()


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_full_disk_fails_loudly_and_keeps_the_previous_checkpoint(
    small_disk: Path, async_save: bool
) -> None:
    manager = CheckpointManager(str(small_disk), keep=1, async_save=async_save)
    manager.save(10, state(1.0, size=1024), blocking=True)
    with pytest.raises(CheckpointSaveError, match="step 20"):
        save_and_commit(manager, 20, state(2.0, size=1024 * 1024))  # 4 MiB
    assert manager.valid_steps() == [10]
    assert loaded(manager, size=1024) == (10, 1.0)


def test_pruning_keeps_the_newest_k_and_never_the_newest_valid(tmp_path: Path) -> None:
    manager = CheckpointManager(str(tmp_path), keep=2, async_save=False)
    for step in (10, 20, 30):
        manager.save(step, state(float(step)))
    assert manager.valid_steps() == [30, 20]
    (tmp_path / "step-40").mkdir()  # a save in progress (or abandoned) above the newest valid
    manager.prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-20", "step-30", "step-40"]
    keep_one = CheckpointManager(str(tmp_path), keep=1, async_save=False)
    keep_one.prune()
    assert keep_one.valid_steps() == [30]
    assert loaded(keep_one) == (30, 30.0)


def test_async_save_commits_on_wait(tmp_path: Path) -> None:
    manager = CheckpointManager(str(tmp_path), keep=3)
    manager.save(5, state(5.0))
    manager.wait()
    assert manager.valid_steps() == [5]
    assert loaded(manager) == (5, 5.0)


def test_a_checkpoint_is_reported_when_committed_not_when_its_async_save_starts(
    tmp_path: Path,
) -> None:
    """What status.lastCheckpoint names comes from this callback: it must never name a
    directory whose save is still in flight (a restart could find it incomplete)."""
    reported: list[tuple[int, str, bool]] = []
    manager = CheckpointManager(str(tmp_path), keep=3)
    manager.on_commit = lambda step, path: reported.append(
        (step, path, (Path(path) / METADATA).exists())
    )
    manager.save(5, state(5.0, size=1 << 20))
    manager.wait_staged()
    assert reported == [], "not at the save's start, nor once its staging is done"
    manager.wait()
    assert reported == [(5, str(tmp_path / "step-5"), True)], "at the commit, complete"


def test_an_async_save_holds_the_state_of_its_step_once_staged(tmp_path: Path) -> None:
    manager = CheckpointManager(str(tmp_path), keep=3)
    live = state(5.0, size=1 << 20)
    manager.save(5, live)
    manager.wait_staged()  # what the trainer's optimizer step waits for
    live["app"]["weights"].fill_(6.0)  # type: ignore[index]
    manager.close()
    assert loaded(manager, size=1 << 20) == (5, 5.0)


def test_fsspec_url(tmp_path: Path) -> None:
    manager = CheckpointManager(f"file://{tmp_path}/remote", keep=2, async_save=False)
    manager.save(7, state(7.0))
    assert (tmp_path / "remote" / "step-7" / METADATA).exists()
    assert loaded(CheckpointManager(f"file://{tmp_path}/remote")) == (7, 7.0)
