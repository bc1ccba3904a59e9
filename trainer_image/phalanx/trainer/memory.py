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
own tensors (an FSDP or tensor-parallel shard is its local part), its rank and world size, and
whether the state is replicated (no DTensor: DDP), which any rank can load at any world size.

When it is used: every rank of the new epoch says which snapshot step it can load (one of its
own layout, or a replicated one). When all name the same step, not older than the newest valid
checkpoint on storage, each loads its own. When some have none (a replacement pod, a hot spare)
but the state is replicated (DDP) and the newest snapshot is newer than storage, the lowest rank
holding it sends it to all (a peer's memory instead of storage, as DLRover does). Otherwise (a
rank's last write did not finish, a resized sharded job) all load from storage, so no rank ever
resumes from a step its peers do not.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from phalanx.trainer.distributed import all_ok

log = logging.getLogger(__name__)


def host_copy(value: Any) -> Any:
    """The state dict with every tensor copied to host memory (a DTensor as its local part)."""
    if isinstance(value, dict):
        return {key: host_copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(host_copy(item) for item in value)
    if isinstance(value, DTensor):
        value = value.to_local()
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
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
    source: str | None = field(default=None, init=False)
    """After `load`: "memory" (each rank its own snapshot), "peer" (sent by a peer), or None."""
    _writer: threading.Thread | None = field(default=None, init=False)
    _error: BaseException | None = field(default=None, init=False)

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
        snapshot = {
            "step": step,
            "rank": dist.get_rank() if dist.is_initialized() else 0,
            "world": dist.get_world_size() if dist.is_initialized() else 1,
            "replicated": not has_shards(state),
            "state": host_copy(state),
        }
        self._writer = threading.Thread(
            target=self._write, args=(snapshot,), name="memory-snapshot", daemon=True
        )
        self._writer.start()
        return True

    def _write(self, snapshot: dict[str, Any]) -> None:
        temporary = self.path.with_suffix(".tmp")
        try:
            torch.save(snapshot, temporary)
            temporary.replace(self.path)
        except BaseException as error:  # a full tmpfs: storage checkpoints still work
            self._error = error

    def wait(self) -> None:
        """Let an in-flight snapshot finish; a failed one is logged, not fatal."""
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
        if snapshot["replicated"] or (snapshot["rank"], snapshot["world"]) == (rank, world):
            return snapshot
        return None

    def load(self, state: Any, storage_step: int | None) -> int | None:
        """Load the snapshot every rank holds (or, for a replicated state, the newest one a peer
        holds) when it is not older than `storage_step`, the newest valid checkpoint on storage:
        its step, or None (load from storage)."""
        self.source = None
        snapshot = self._usable()
        live = state.state_dict()
        views = self._gather((snapshot["step"] if snapshot else -1, not has_shards(live)))
        steps = [step for step, _ in views]
        step, floor = max(steps), -1 if storage_step is None else storage_step
        if step < 0 or step < floor:
            return None
        if any(s != step for s in steps):
            if not all(r for _, r in views) or step == floor:  # storage is as new: no transfer
                return None
            snapshot = self._from_peer(steps.index(step), snapshot)
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

    def _from_peer(self, source: int, own: dict[str, Any] | None) -> dict[str, Any]:
        """The snapshot rank `source` holds, sent to every rank of the group."""
        box: list[dict[str, Any] | None] = [own if dist.get_rank() == source else None]
        dist.broadcast_object_list(box, src=source, group=self.process_group)
        assert box[0] is not None
        return box[0]

    def _gather(self, view: tuple[int, bool]) -> list[tuple[int, bool]]:
        if not dist.is_initialized():
            return [view]
        views: list[tuple[int, bool]] = [(-1, False)] * dist.get_world_size(self.process_group)
        dist.all_gather_object(views, view, group=self.process_group)
        return views
