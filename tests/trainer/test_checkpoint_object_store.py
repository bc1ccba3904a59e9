"""Checkpoints on an object store (s3:// through s3fs), against a real S3 server (versitygw on
loopback, tests/support/object_store.py): the newest-valid rule holds there as on a directory.

Covers: a partial newest upload (its shards uploaded, its `.metadata` not) is skipped with a
warning and the one before is resumed from; pruning keeps the newest K valid, never the newest
valid one, and leaves a newer partial upload alone; an async save commits; a checkpoint another
process uploaded is seen though this process listed the location before (s3fs caches
listings). One rank, in a real (single-member) gloo process group; resharding across world sizes
on an object store is the local backend's test (tests/local/test_object_storage.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import torch
import torch.distributed as dist

from phalanx.resume.checkpoint import METADATA, CheckpointManager
from tests.support.object_store import ObjectStore, running_object_store

BUCKET = "checkpoints"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    with running_object_store(tmp_path_factory.mktemp("s3")) as running:
        yield running


@pytest.fixture(autouse=True)
def one_rank(store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in store.client_env().items():
        monkeypatch.setenv(name, value)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    yield
    dist.destroy_process_group()


def state(value: float) -> dict[str, object]:
    return {"app": {"weights": torch.full((64,), value), "bias": torch.tensor([value])}}


def loaded(manager: CheckpointManager) -> tuple[int | None, float]:
    target = state(-1.0)
    step = manager.load_latest(target)
    return step, float(target["app"]["weights"][0])  # type: ignore[index]


def objects(store: ObjectStore, job: str) -> list[str]:
    """The job's objects, as the server keeps them (files under its folder)."""
    folder = store.folder / BUCKET / job
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_partial_newest_upload_is_skipped(
    store: ObjectStore, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    job = request.node.name[:40]
    manager = CheckpointManager(f"s3://{BUCKET}/{job}", keep=5, async_save=False)
    manager.save(10, state(1.0))
    manager.save(20, state(2.0))
    assert f"step-20/{METADATA}" in objects(store, job)
    (store.folder / BUCKET / job / "step-20" / METADATA).unlink()  # its last upload never came
    with caplog.at_level(logging.WARNING):
        assert loaded(manager) == (10, 1.0)
    assert "step-20: no .metadata" in caplog.text


def test_pruning_never_deletes_the_newest_valid_or_a_newer_upload(
    store: ObjectStore, request: pytest.FixtureRequest
) -> None:
    job = request.node.name[:40]
    manager = CheckpointManager(f"s3://{BUCKET}/{job}", keep=2, async_save=False)
    for step in (10, 20, 30):
        manager.save(step, state(float(step)))
    uploading = store.folder / BUCKET / job / "step-40"
    uploading.mkdir()
    (uploading / "__0_0.distcp").write_bytes(b"\0" * 128)  # a save still uploading
    manager.prune()
    steps = {name.split("/")[0] for name in objects(store, job)}
    assert steps == {"step-20", "step-30", "step-40"}
    assert loaded(manager) == (30, 30.0)


def test_an_async_save_commits_on_wait(store: ObjectStore, request: pytest.FixtureRequest) -> None:
    job = request.node.name[:40]
    manager = CheckpointManager(f"s3://{BUCKET}/{job}", keep=3, async_save=True)
    manager.save(5, state(5.0))
    manager.wait()
    assert f"step-5/{METADATA}" in objects(store, job)
    assert loaded(manager) == (5, 5.0)


def test_a_checkpoint_another_process_uploaded_is_seen(
    store: ObjectStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    job = request.node.name[:40]
    manager = CheckpointManager(f"s3://{BUCKET}/{job}", keep=5, async_save=False)
    manager.save(10, state(1.0))
    assert manager.valid_steps() == [10]  # listed, and so cached by s3fs
    other = fsspec.filesystem("s3", skip_instance_cache=True)  # another process's client
    local = tmp_path / "step-10"
    other.get(f"{BUCKET}/{job}/step-10", str(local), recursive=True)
    other.put(str(local), f"{BUCKET}/{job}/step-20", recursive=True)
    assert manager.valid_steps() == [20, 10]
