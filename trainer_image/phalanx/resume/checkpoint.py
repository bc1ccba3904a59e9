"""Sharded checkpoints on torch.distributed.checkpoint (DCP): `step-<N>/` directories, async save
by default, keep the last K, resume from the newest *valid* one, resharded to the current world.

A directory is valid only when its `.metadata` exists: DCP writes it last, atomically (a temporary
file renamed), after every rank's shards. Partial or corrupt directories are skipped with a
warning and the previous valid one is used; all ranks agree on which one loaded. The newest valid
checkpoint is never deleted. Works on a local or shared directory and on an fsspec URL (an object
store: s3:// through s3fs, gs:// through gcsfs), where the same rule holds: an object exists only
once its upload completed, and `.metadata` is uploaded after every shard.

An async save first stages the state into host memory (`devices.stager`: on a GPU, pinned
buffers filled by non-blocking copies on a stream of their own, in a background thread), then
writes it from another thread. Training goes on meanwhile; only the next optimizer step, the
first thing that changes the saved tensors, waits for the staging (`wait_staged`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import fsspec
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter

try:
    from torch.distributed.checkpoint.fsspec_filesystem import FsspecReader, FsspecWriter
except ImportError:  # an older torch (2.11, seen in a GPU image) names the module privately
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
from torch.distributed.checkpoint.staging import DefaultStager
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse
from torch.distributed.checkpoint.state_dict_saver import async_save as dcp_async_save
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from phalanx.resume import devices
from phalanx.resume.collectives import all_ok
from phalanx.resume.staging import FromSnapshot, LentSnapshot

log = logging.getLogger(__name__)
METADATA = ".metadata"
_STEP_DIR = re.compile(r"^step-(\d+)$")


class CheckpointSaveError(RuntimeError):
    """A save failed; the previous valid checkpoint is untouched."""

    def __init__(self, message: str, step: int | None = None) -> None:
        super().__init__(message)
        self.step = step


@dataclass
class CheckpointManager:
    """Saves and loads one job's checkpoints under `location` (a path or an fsspec URL)."""

    location: str
    keep: int = 3
    async_save: bool = True
    process_group: dist.ProcessGroup | None = None
    """A group for checkpoint collectives, so a background save never races training's."""
    on_commit: Callable[[int, str], None] | None = None
    """Called on every rank with (step, location) once a save is committed (`.metadata` written)."""
    _pending: Future[Any] | None = field(default=None, init=False)
    _pending_step: int | None = field(default=None, init=False)
    _staged: Future[None] | None = field(default=None, init=False)
    _stager: DefaultStager | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.fs, self.root = fsspec.core.url_to_fs(self.location)
        self.is_url = "://" in self.location
        if self._is_coordinator():
            self.fs.makedirs(self.root, exist_ok=True)

    # listing -----------------------------------------------------------------------------
    def path(self, step: int) -> str:
        return f"{self.root.rstrip('/')}/step-{step}"

    def valid_steps(self, *, resuming: bool = False) -> list[int]:
        """Steps with a committed checkpoint, newest first.

        A directory without `.metadata` is partial. Older than the newest valid one, it is an
        abandoned save and is warned about; newer, it may be a save still running on other
        ranks, so it is only warned about when `resuming` (nothing is saving then).
        """
        steps: list[int] = []
        partial: list[int] = []
        for step in self._step_dirs():
            (steps if self.fs.exists(f"{self.path(step)}/{METADATA}") else partial).append(step)
        newest = max(steps, default=-1)
        for step in partial:
            if resuming or step < newest:
                log.warning(
                    "skipping %s: no %s (a save that did not finish)", self.path(step), METADATA
                )
        return sorted(steps, reverse=True)

    def _step_dirs(self) -> list[int]:
        # Other ranks and other epochs' processes write here: an object store's filesystem
        # (s3fs, gcsfs) would answer from the listings it cached.
        self.fs.invalidate_cache(self.root)
        if not self.fs.exists(self.root):
            return []
        names = (
            entry.rstrip("/").rsplit("/", 1)[-1] for entry in self.fs.ls(self.root, detail=False)
        )
        return [int(m.group(1)) for name in names if (m := _STEP_DIR.match(name))]

    # saving ------------------------------------------------------------------------------
    def save(self, step: int, state: dict[str, Any], *, blocking: bool = False,
             snapshot: LentSnapshot | None = None) -> None:  # fmt: skip
        """Checkpoint `state` as step `step`; async unless `blocking` or configured sync. An
        async save stages from `snapshot` (the memory snapshot of this step) when it holds the
        same tensors (`staging`), and gives it back once uploaded."""
        self.wait()
        writer = self._writer(self.path(step))
        lent = snapshot
        try:
            if self.async_save and not blocking:
                if self._stager is not None and not devices.stager_reusable():
                    self._stager.close()  # the last save is done (`wait` above)
                    self._stager = None
                if self._stager is None:
                    self._stager = devices.stager()  # kept: its host buffers are reused
                stager = self._stager if lent is None else FromSnapshot(lent, self._stager)
                devices.settle()
                response = dcp_async_save(
                    state,
                    storage_writer=writer,
                    process_group=self.process_group,
                    async_stager=stager,
                )
                assert isinstance(response, AsyncSaveResponse)  # the stager stages async
                self._staged, self._pending = (
                    response.staging_completion,
                    response.upload_completion,
                )
                self._pending_step = step
                if lent is not None:
                    lent.hold_until(response.upload_completion)
                    lent = None
                return
            dcp_save(state, storage_writer=writer, process_group=self.process_group)
        except (Exception, CheckpointException) as error:
            raise CheckpointSaveError(
                f"saving step {step} to {self.path(step)} failed: {error}", step
            ) from error
        finally:
            if lent is not None:  # not staged from it, or the save failed: the slot is free
                lent.returned.set()
        self._committed(step)

    def wait_staged(self) -> None:
        """Block until an in-flight async save has copied the state (call before changing it)."""
        staged, self._staged = self._staged, None
        if staged is None:
            return
        try:
            staged.result()
        except (Exception, CheckpointException) as error:
            raise CheckpointSaveError(
                f"staging step {self._pending_step} failed: {error}", self._pending_step
            ) from error

    def close(self) -> None:
        """Finish an in-flight save and free the host buffers of staging."""
        self.wait()
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    def wait(self) -> None:
        """Block until an in-flight async save is committed (or raise if it failed)."""
        self.wait_staged()
        if self._pending is None:
            return
        pending, step = self._pending, self._pending_step
        self._pending = self._pending_step = None
        try:
            pending.result()
        except (Exception, CheckpointException) as error:
            raise CheckpointSaveError(f"async save of step {step} failed: {error}", step) from error
        assert step is not None
        self._committed(step)

    def uploading(self) -> bool:
        """Whether an async save is still being written (`wait` would block on it)."""
        return self._pending is not None and not self._pending.done()

    def poll(self) -> None:
        """Finish the bookkeeping of an async save that has completed meanwhile (its commit
        callback, pruning) without waiting for one that has not."""
        if self._pending is not None and self._pending.done():
            self.wait()

    def _committed(self, step: int) -> None:
        if self._is_coordinator():
            self.prune()
        if self.on_commit is not None:
            self.on_commit(step, self.location_for(self.path(step)))

    def prune(self) -> None:
        """Delete all but the newest `keep` valid checkpoints, and partial ones older than the
        newest valid one. The newest valid checkpoint is never deleted."""
        valid = self.valid_steps()
        if not valid:
            return
        newest = valid[0]
        doomed = set(valid[max(self.keep, 1) :])
        doomed |= {step for step in self._step_dirs() if step < newest and step not in valid}
        for step in sorted(doomed):
            assert step != newest
            self.fs.rm(self.path(step), recursive=True)

    # loading -----------------------------------------------------------------------------
    def load_latest(self, state: dict[str, Any]) -> int | None:
        """Load the newest valid checkpoint into `state` (resharding as needed); the step, or None.

        A checkpoint that fails to load on any rank is skipped on all ranks, and the previous
        one is tried, so every rank resumes from the same step.
        """
        for step in self._agreed(self.valid_steps(resuming=True)):
            error = None
            try:
                dcp_load(
                    state,
                    storage_reader=self._reader(self.path(step)),
                    process_group=self.process_group,
                )
            except (Exception, CheckpointException) as exc:  # a truncated or corrupt shard
                error = exc
            if all_ok(error is None, self.process_group):
                return step
            log.warning(
                "checkpoint %s is unreadable (%s); trying the previous one", self.path(step), error
            )
        return None

    def newest_valid(self) -> int | None:
        """The newest valid checkpoint's step as every rank sees it (rank 0's view), or None."""
        return next(iter(self._agreed(self.valid_steps(resuming=True))), None)

    def _agreed(self, steps: list[int]) -> list[int]:
        """Rank 0's view of the valid steps, so a shared-filesystem race cannot split ranks."""
        if not dist.is_initialized():
            return steps
        box = [steps]
        dist.broadcast_object_list(box, src=0, group=self.process_group)
        return list(box[0])

    def _writer(self, path: str) -> Any:
        # An object store has no fsync: an object is there, whole, once its upload completes
        # (the writer's close), and DCP writes `.metadata` after every shard's.
        if self.is_url:
            return FsspecWriter(self.location_for(path), sync_files=False)
        return FileSystemWriter(path)

    def _reader(self, path: str) -> Any:
        return FsspecReader(self.location_for(path)) if self.is_url else FileSystemReader(path)

    def location_for(self, path: str) -> str:
        """The path as the storage layer wants it: a URL when the location is one."""
        if not self.is_url:
            return path
        protocol = self.location.split("://", 1)[0]
        return f"{protocol}://{path}"

    def _is_coordinator(self) -> bool:
        return not dist.is_initialized() or dist.get_rank() == 0
