"""Checkpoints in host memory: each rank's newest state, snapshotted every few steps into its
pod's memory, so a restart whose ranks survived resumes from the last snapshot instead of the
last checkpoint on storage, and redoes at most a few steps.

Why files in a memory directory: the workers are the processes that die; the pod and its agent
outlive them. A file under /dev/shm (tmpfs; on a cluster the operator mounts a Memory emptyDir
there) is host memory that survives a worker and goes with the pod, as a machine's memory goes
with the machine. The agent names one directory per pod (PHALANX_CHECKPOINT_MEMORY_DIR) and
removes it when it exits.

What is kept: each worker keeps one snapshot, `local-<local rank>.pt`, written by a background
thread to a temporary name and renamed, so a snapshot is whole or absent. It holds the rank's
own tensors (an FSDP or tensor-parallel shard is its local part), its rank and world size, the
part of the model it covers (its pipeline stage; "model" without pipeline parallelism), and
whether the state is replicated (no DTensor: DDP), which any rank holding the same part can load
at any world size: with pipeline parallelism a peer replica of the same stage, never another
stage.

How it gets to host memory: as a checkpoint does (`devices.stager`): a background copy into
host buffers reused from one snapshot to the next (pinned, by non-blocking copies on a stream of
their own on a GPU), which the next optimizer step waits for (`wait_staged`), then `torch.save`
in the writer thread.

When it is used: every rank of the new epoch says which snapshot step it can load (one of its
own layout, or a replicated one). When all name the same step, not older than the newest valid
checkpoint on storage, each loads its own. When some have none (a replacement pod, a hot spare)
but the state is replicated (DDP) and the newest snapshot is newer than storage, for each part
the lowest rank holding it sends it to the ranks of that part (a peer's memory instead of
storage, as DLRover does); if some part has no holder, all load from storage. Otherwise (a
rank's last write did not finish, a resized sharded job) all load from storage, so no rank ever
resumes from a step its peers do not.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.staging import DefaultStager
from torch.distributed.tensor import DTensor

from phalanx.resume import devices
from phalanx.resume.collectives import all_ok

log = logging.getLogger(__name__)


def local_view(value: Any) -> Any:
    """The state dict with every DTensor replaced by its local part (a view: nothing is copied)."""
    if isinstance(value, dict):
        return {key: local_view(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(local_view(item) for item in value)
    if isinstance(value, DTensor):
        return value.to_local()
    return value


def has_shards(value: Any) -> bool:
    """Any DTensor in the state: it is sharded (FSDP, tensor parallel), not replicated."""
    if isinstance(value, dict):
        return any(has_shards(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(has_shards(item) for item in value)
    return isinstance(value, DTensor)


def restore_into(current: Any, saved: Any) -> Any:
    """`current` (the live state dict, whose tensors have the layout this rank needs) with the
    saved values copied in. Everything is checked before anything is copied: a snapshot whose
    structure or shapes differ raises ValueError and leaves the live state untouched."""
    copies: list[tuple[torch.Tensor, torch.Tensor]] = []
    merged = _pair(current, saved, "state", copies)
    with torch.no_grad():
        for target, source in copies:
            target.copy_(source)
    return merged


def _pair(current: Any, saved: Any, where: str, copies: list[tuple[torch.Tensor, Any]]) -> Any:
    if isinstance(current, dict):
        if not isinstance(saved, dict) or set(saved) != set(current):
            raise ValueError(f"{where}: the snapshot's keys differ")
        return {key: _pair(current[key], saved[key], f"{where}.{key}", copies) for key in current}
    if isinstance(current, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(current):
            raise ValueError(f"{where}: the snapshot's length differs")
        return type(current)(
            _pair(c, s, f"{where}[{i}]", copies)
            for i, (c, s) in enumerate(zip(current, saved, strict=True))
        )
    if isinstance(current, torch.Tensor):
        local = current.to_local() if isinstance(current, DTensor) else current
        if not isinstance(saved, torch.Tensor) or saved.shape != local.shape:
            raise ValueError(f"{where}: the snapshot's shape differs")
        copies.append((local, saved))
        return current
    return saved


@dataclass
class MemorySnapshots:
    """One worker's snapshots in its pod's memory directory (None: snapshots are off)."""

    directory: Path | None
    interval_steps: int
    local_rank: int
    process_group: dist.ProcessGroup | None = None
    part: str = "model"
    """The part of the model this rank holds (`parallel.Layout.part`)."""
    source: str | None = field(default=None, init=False)
    """After `load`: "memory" (each rank its own snapshot), "peer" (sent by a peer), or None."""
    _writer: threading.Thread | None = field(default=None, init=False)
    _error: BaseException | None = field(default=None, init=False)
    _staged: Future[Any] | None = field(default=None, init=False)
    _stager: DefaultStager | None = field(default=None, init=False)

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.interval_steps > 0

    @property
    def path(self) -> Path:
        assert self.directory is not None
        return self.directory / f"local-{self.local_rank}.pt"

    def maybe_save(self, step: int, stateful: Any) -> bool:
        """Snapshot `stateful.state_dict()` at `step` when the cadence says so; training goes on
        while a background thread writes it. True if a snapshot was taken."""
        if not self.enabled or step % self.interval_steps:
            return False
        self.wait()
        state = stateful.state_dict()
        if self._stager is None:
            self._stager = devices.stager()  # kept: its host buffers are reused
        devices.settle()
        staged = self._stager.stage(local_view(state))
        assert isinstance(staged, Future)  # the stager stages async
        self._staged = staged
        header = {
            "step": step,
            "rank": dist.get_rank() if dist.is_initialized() else 0,
            "world": dist.get_world_size() if dist.is_initialized() else 1,
            "part": self.part,
            "replicated": not has_shards(state),
        }
        self._writer = threading.Thread(
            target=self._write, args=(header, staged), name="memory-snapshot", daemon=True
        )
        self._writer.start()
        return True

    def _write(self, header: dict[str, Any], staged: Future[Any]) -> None:
        temporary = self.path.with_suffix(".tmp")
        try:
            torch.save({**header, "state": staged.result()}, temporary)
            temporary.replace(self.path)
        except BaseException as error:  # a full tmpfs: storage checkpoints still work
            self._error = error

    def wait_staged(self) -> None:
        """Block until an in-flight snapshot has copied the state (call before changing it); a
        failed copy is the writer's to report."""
        staged, self._staged = self._staged, None
        if staged is not None:
            staged.exception()

    def close(self) -> None:
        """Finish an in-flight snapshot and free the host buffers of staging."""
        self.wait()
        if self._stager is not None:
            self._stager.close()
            self._stager = None

    def wait(self) -> None:
        """Let an in-flight snapshot finish; a failed one is logged, not fatal."""
        self._staged = None
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._error is not None:
            log.warning("memory snapshot not written: %s", self._error)
            self._error = None

    def _usable(self) -> dict[str, Any] | None:
        """This rank's snapshot, if it fits the current world (or is replicated)."""
        if not self.enabled or not self.path.exists():
            return None
        try:
            snapshot: dict[str, Any] = torch.load(self.path, weights_only=False)
        except Exception as error:
            log.warning("memory snapshot %s unreadable: %s", self.path, error)
            return None
        rank = dist.get_rank() if dist.is_initialized() else 0
        world = dist.get_world_size() if dist.is_initialized() else 1
        if snapshot.get("part", "model") != self.part:
            return None
        if snapshot["replicated"] or (snapshot["rank"], snapshot["world"]) == (rank, world):
            return snapshot
        return None

    def load(self, state: Any, storage_step: int | None) -> int | None:
        """Load the snapshot every rank holds (or, for a replicated state, the newest one a peer
        of the same part holds) when it is not older than `storage_step`, the newest valid
        checkpoint on storage: its step, or None (load from storage)."""
        self.source = None
        snapshot = self._usable()
        live = state.state_dict()
        view = (snapshot["step"] if snapshot else -1, not has_shards(live), self.part)
        views = self._gather(view)
        steps = [step for step, _, _ in views]
        step, floor = max(steps), -1 if storage_step is None else storage_step
        if step < 0 or step < floor:
            return None
        if any(s != step for s in steps):
            if not all(r for _, r, _ in views) or step == floor:  # storage is as new: no transfer
                return None
            holders: dict[str, int] = {}  # the lowest rank holding `step`, for each part
            for rank, (held, _, part) in enumerate(views):
                if held == step:
                    holders.setdefault(part, rank)
            if {part for _, _, part in views} - set(holders):
                return None  # a part no rank holds at that step: storage, for all
            snapshot = self._from_peers(holders, snapshot)
        assert snapshot is not None
        error = None
        try:
            state.load_state_dict(restore_into(live, snapshot["state"]))
        except (ValueError, RuntimeError) as exc:
            error = exc
        if not all_ok(error is None, self.process_group):
            log.warning("memory snapshot of step %d not loaded (%s); using storage", step, error)
            return None
        self.source = "memory" if all(s == step for s in steps) else "peer"
        return step

    def _from_peers(self, holders: dict[str, int], own: dict[str, Any] | None) -> dict[str, Any]:
        """The snapshot of this rank's part, sent by its holder. Each holder sends to the whole
        group in turn (the parts in one order on every rank); a rank keeps its own part's."""
        mine = None
        for part, source in sorted(holders.items()):
            box: list[dict[str, Any] | None] = [own if dist.get_rank() == source else None]
            dist.broadcast_object_list(box, src=source, group=self.process_group)
            if part == self.part:
                mine = box[0]
        assert mine is not None
        return mine

    def _gather(self, view: tuple[int, bool, str]) -> list[tuple[int, bool, str]]:
        if not dist.is_initialized():
            return [view]
        views: list[tuple[int, bool, str]] = [(-1, False, "")] * dist.get_world_size(
            self.process_group
        )
        dist.all_gather_object(views, view, group=self.process_group)
        return views
