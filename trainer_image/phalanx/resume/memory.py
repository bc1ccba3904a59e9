"""Checkpoints in host memory: each rank's newest state, snapshotted every few steps into its
pod's memory, so a restart whose ranks survived resumes from the last snapshot instead of the
last checkpoint on storage, and redoes at most a few steps.

Why files in a memory directory: the workers are the processes that die; the pod and its agent
outlive them. A file under /dev/shm (tmpfs; on a cluster the operator mounts a Memory emptyDir
there) is host memory that survives a worker and goes with the pod, as a machine's memory goes
with the machine. The agent names one directory per pod (PHALANX_CHECKPOINT_MEMORY_DIR) and
removes it when it exits.

What is kept: each worker keeps its newest snapshot, `local-<local rank>.pt`, written by a
background thread to a temporary name and renamed, so a snapshot is whole or absent. It holds the
rank's own tensors (an FSDP or tensor-parallel shard is its local part), its rank and world size,
the part of the model it covers (its pipeline stage; "model" without pipeline parallelism), and
whether the state is replicated (no DTensor: DDP), which any rank holding the same part can load
at any world size: with pipeline parallelism a peer replica of the same stage, never another
stage. A sharded rank also keeps the snapshot before its newest (`local-<local rank>.prev.pt`):
a kill that lands while one rank still writes step N leaves it holding N - 1 while its peers
hold N, and without N - 1 on the peers no step would be common and every rank would fall back
to storage (up to a whole checkpoint interval redone). A replicated state needs no second slot:
a peer sends its newest. The cost is one more shard in host memory (three while a write is in
flight), for sharded states only.

How it gets to host memory: as a checkpoint does (`devices.stager`): a background copy into
host buffers reused from one snapshot to the next (pinned, by non-blocking copies on a stream of
their own on a GPU), which the next optimizer step waits for (`wait_staged`), then `torch.save`
in the writer thread.

When it is used: every rank of the new epoch says which snapshot steps it can load (its own
layout, or a replicated one). When the newest step every rank holds is not older than the newest
valid checkpoint on storage, each loads its own snapshot of that step. When some have none (a
replacement pod, a hot spare) but the state is replicated (DDP) and the newest snapshot any rank
holds is newer than storage, for each part the lowest rank holding it sends it to the ranks of
that part (a peer's memory instead of storage, as DLRover does); if some part has no holder,
all load from storage. Otherwise (a resized sharded job, a rank with nothing) all load from
storage, so no rank ever resumes from a step its peers do not.
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

View = tuple[list[int], bool, str]
"""What a rank tells its peers at load: the snapshot steps it holds (newest first), whether its
live state is replicated, and its part of the model."""


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
        """The newest snapshot."""
        assert self.directory is not None
        return self.directory / f"local-{self.local_rank}.pt"

    @property
    def previous_path(self) -> Path:
        """The snapshot before the newest (sharded states only)."""
        return self.path.with_suffix(".prev.pt")

    def holds_any(self) -> bool:
        """Whether this rank has a snapshot to offer (usable or not: `load` decides)."""
        return self.enabled and (self.path.exists() or self.previous_path.exists())

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
            if header["replicated"]:
                self.previous_path.unlink(missing_ok=True)
            elif self.path.exists():
                self.path.replace(self.previous_path)
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

    def _held(self) -> dict[int, tuple[Path, dict[str, Any]]]:
        """This rank's snapshots that fit the current world (or are replicated), by step. They
        are memory-mapped: only the one loaded is read whole."""
        if not self.enabled:
            return {}
        rank = dist.get_rank() if dist.is_initialized() else 0
        world = dist.get_world_size() if dist.is_initialized() else 1
        held: dict[int, tuple[Path, dict[str, Any]]] = {}
        for path in (self.path, self.previous_path):
            if not path.exists():
                continue
            try:
                snapshot: dict[str, Any] = torch.load(path, weights_only=False, mmap=True)
            except Exception as error:
                log.warning("memory snapshot %s unreadable: %s", path, error)
                continue
            if snapshot.get("part", "model") != self.part:
                continue
            if snapshot["replicated"] or (snapshot["rank"], snapshot["world"]) == (rank, world):
                held.setdefault(int(snapshot["step"]), (path, snapshot))
        return held

    def load(self, state: Any, storage_step: int | None) -> int | None:
        """Load the newest snapshot every rank holds (or, for a replicated state, the newest one
        a peer of the same part holds) when it is not older than `storage_step`, the newest
        valid checkpoint on storage: its step, or None (load from storage)."""
        self.source = None
        held = {step: snapshot for step, (_, snapshot) in self._held().items()}
        live = state.state_dict()
        views = self._gather((sorted(held, reverse=True), not has_shards(live), self.part))
        floor = -1 if storage_step is None else storage_step
        common = set.intersection(*(set(steps) for steps, _, _ in views))
        own = max(common, default=-1)
        newest = max((max(steps, default=-1) for steps, _, _ in views), default=-1)
        replicated = all(r for _, r, _ in views)
        if replicated and newest > max(own, floor):  # a peer holds a newer replicated state
            holders: dict[str, int] = {}  # the lowest rank holding `newest`, for each part
            for rank, (steps, _, part) in enumerate(views):
                if newest in steps:
                    holders.setdefault(part, rank)
            if not {part for _, _, part in views} - set(holders):
                snapshot = self._from_peers(holders, held.get(newest))
                return self._restore(state, live, newest, snapshot, "peer")
        if own < 0 or own < floor:
            return None
        return self._restore(state, live, own, held[own], "memory")

    def discard_newer_than(self, step: int | None) -> None:
        """Remove this rank's snapshots of steps after `step`, the step the job resumed from
        (None: a fresh start, all of them). They belong to a run that was abandoned: kept, a
        later failure could resume from them before this run's own snapshots replace them."""
        for held_step, (path, _) in self._held().items():
            if step is None or held_step > step:
                path.unlink(missing_ok=True)

    def _restore(
        self, state: Any, live: Any, step: int, snapshot: dict[str, Any], source: str
    ) -> int | None:
        """Load `snapshot` into `state` on every rank, or on none (storage for all)."""
        error = None
        try:
            state.load_state_dict(restore_into(live, snapshot["state"]))
        except (ValueError, RuntimeError) as exc:
            error = exc
        if not all_ok(error is None, self.process_group):
            log.warning("memory snapshot of step %d not loaded (%s); using storage", step, error)
            return None
        self.source = source
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

    def _gather(self, view: View) -> list[View]:
        if not dist.is_initialized():
            return [view]
        views: list[View] = [([], False, "")] * dist.get_world_size(self.process_group)
        dist.all_gather_object(views, view, group=self.process_group)
        return views
