"""Checkpoints in host memory: each rank's newest state, snapshotted every few steps into its
pod's memory and a copy of each shard into a buddy pod's, so a restart resumes from the last
snapshot instead of the last checkpoint on storage, and redoes at most a few steps.

Why a memory directory: the workers are the processes that die; the pod and its agent outlive
them. A file under /dev/shm (tmpfs; on a cluster the operator mounts a Memory emptyDir there) is
host memory that survives a worker and goes with the pod, as a machine's memory goes with the
machine. The agent names one directory per pod (PHALANX_CHECKPOINT_MEMORY_DIR) and removes it
when it exits.

What a snapshot costs the training thread: the state dict (its tensors named once, then kept:
`AppState.snapshot_state_dict`), its structure pickled (small), the copy of the tensors into
preallocated slots (`arena`: a mapped file, pinned on a GPU, one `_foreach_copy_` that releases
the GIL), and the start of a background job that commits it and makes the buddy copy. On a GPU
the copy itself is that job's too: DMA on a stream of its own beside the next step's forward and
backward passes, which the next optimizer step waits for (`wait_staged`). On the CPU it is not:
there the background thread would take the cores training runs on, and a replicated state's
commit (a small header) is made at once too. When snapshots are taken: `cadence`, within the
job's overhead budget. A checkpoint of the same step stages from the snapshot's slot
(`lend`, `staging`): one copy of the state serves both.

What is kept, two slots per rank (the newest whole snapshot survives a kill during the next):
- sharded (FSDP, tensor parallel): each rank its own shard, and a copy of its buddy's (the rank
  at its place in the previous pod) sent by the background job after the copy, so the ranks of
  a lost node load from a peer's memory (Gemini's and HyperPod's idea);
- replicated (DDP): the ranks of a pod holding the same part each write one piece, so the pod
  holds one copy of the state, not one per rank; every other pod holds one too, so a lost pod's
  replacement gets it from a peer, and no buddy copy is needed.

When it is used: `recall`, after a restart, by `peers.decide` over what every rank of the new
epoch offers: the newest step not older than storage's newest valid checkpoint whose every
needed unit is held somewhere.
"""

from __future__ import annotations

import logging
import pickle
import socket
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from phalanx.resume import arena, devices, recall, wire
from phalanx.resume.arena import Header, Slot, Unit
from phalanx.resume.collectives import rank_and_world
from phalanx.resume.staging import Copied, LentSnapshot
from phalanx.resume.statedict import local_tensors

log = logging.getLogger(__name__)


@dataclass
class MemorySnapshots:
    """One worker's snapshots in its pod's memory directory (None: snapshots are off)."""

    directory: Path | None
    interval_steps: int
    local_rank: int
    process_group: dist.ProcessGroup | None = None
    """A gloo group of its own (the buddy copies run on a background thread)."""
    part: str = "model"
    """The part of the model this rank holds (`parallel.Layout.part`)."""
    background: bool = field(default_factory=lambda: devices.device().type == "cuda")
    """Whether the copy runs on the snapshot thread (a GPU: DMA beside the next forward and
    backward passes) or in `maybe_save` (the CPU: a copy in the background takes the cores
    training runs on)."""
    source: str | None = field(default=None, init=False)
    """After `load`: "memory" (each rank from its pod), "peer" (some sent by a peer), or None."""
    _roles: wire.Roles | None = field(default=None, init=False)
    _job: Future[None] | None = field(default=None, init=False)
    _copied: Copied | None = field(default=None, init=False)
    _taken: tuple[Slot, LentSnapshot] | None = field(default=None, init=False)
    """The newest snapshot when it holds the rank's whole state: a checkpoint may stage from it."""
    _lent: dict[Path, LentSnapshot] = field(default_factory=dict, init=False)
    first_use: bool = field(default=False, init=False)
    """Whether the last snapshot wrote a slot this process had not written (its pages touched
    or mapped, once): its cost says little about the next ones' (`cadence`)."""
    _error: BaseException | None = field(default=None, init=False)
    _worker: ThreadPoolExecutor | None = field(default=None, init=False)
    _stream: Any = field(default=None, init=False)
    _slot_cache: dict[str, tuple[Slot, Slot]] = field(default_factory=dict, init=False)
    _laid_out: tuple[Any, tuple[arena.Entry, ...], int] | None = field(default=None, init=False)

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.interval_steps > 0

    def own_slots(self) -> tuple[Slot, Slot]:
        return self._slots(f"local-{self.local_rank}")

    def kept_slots(self) -> tuple[Slot, Slot]:
        """Where this rank keeps its buddy's shard."""
        return self._slots(f"local-{self.local_rank}-keeps")

    def holds_any(self) -> bool:
        """Whether this pod has a snapshot to offer (usable or not: `load` decides)."""
        return self.enabled and any(self._directory.glob("*.meta"))

    # taking snapshots -----------------------------------------------------------------------
    def maybe_save(self, step: int, stateful: Any, *, due: bool | None = None) -> bool:
        """Snapshot the stateful's state (`_snapshot_state`) at `step` when `due`, or (None)
        every `interval_steps`. On a GPU the copy runs in the background (the optimizer step
        waits for it); on the CPU it is made here, which measured cheaper than beside
        training's threads (docs/figures.md, "Snapshots").
        The buddy copy runs in the background, and so does the commit but for a replicated
        state on the CPU. True if a snapshot was taken."""
        if not self.enabled or not (step % self.interval_steps == 0 if due is None else due):
            return False
        self.wait()
        header, tensors = self._header(step, stateful)
        first, end = header.first, header.first + len(header.entries)
        replicated = header.unit.kind == "piece"
        devices.settle()
        slot = arena.older(self.own_slots())
        returning = self._lent.pop(slot.data, None)  # here: `lend` may lend this one at once
        self.first_use = not slot.ready(header.size)
        self._copied = copied = Copied()
        whole = (first, end) == (0, len(tensors))
        self._taken = (slot, LentSnapshot(step, header.entries, copied)) if whole else None
        target, mine = (slot, returning), tensors[first:end]
        if self.background:
            self._submit(lambda: self._take(header, mine, target, copied, not replicated))
        else:
            written = self._write(header, mine, target, copied)
            if replicated:  # only the header to write: a thread woken for it costs more
                self._finish(header, written, keep_copy=False)
            else:
                self._submit(lambda: self._finish(header, written, True))
        return True

    def prepare(self, stateful: Any) -> None:
        """Map this rank's empty slots for the state's size with their pages made
        (`Slot.prepare`), here, on the calling thread: the first snapshot into each then costs
        what the others do. Call once the state's size is known (an optimizer's state exists
        after its first step) and before training's steady state."""
        if self.enabled:
            size = self._header(0, stateful)[0].size
            self.wait()
            try:
                for slot in self.own_slots():
                    slot.prepare(size)
            except Exception as error:  # a full tmpfs: the first snapshot fails as the copy would
                self._error = error

    def _header(self, step: int, stateful: Any) -> tuple[Header, list[torch.Tensor]]:
        """The header of this rank's snapshot of the state at `step` (its piece of a replicated
        state, or its shard), and the state's tensors (a collective the first time: `assign`)."""
        skeleton, tensors, sharded = local_tensors(_snapshot_state(stateful))
        roles = self.assign()
        rank, world = rank_and_world()
        if sharded:
            first, end = 0, len(tensors)
            unit = Unit(step, self.part, "shard", rank, world)
        else:
            first, end = arena.pieces(tensors, roles.pieces)[roles.piece]
            unit = Unit(step, self.part, "piece", roles.piece, roles.pieces)
        entries, size = self._layout(tensors[first:end])
        return Header(unit, pickle.dumps(skeleton), first, entries, size), tensors

    def _submit(self, job: Callable[[], None]) -> None:
        """Run `job` on the snapshot thread, as the in-flight job (`wait`)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="memory-snapshot")
        self._job = self._worker.submit(job)

    @property
    def lends(self) -> bool:
        """Whether the last snapshot held this rank's whole state, so a checkpoint at a
        snapshot's step may stage from it (`lend`)."""
        return self._taken is not None

    def lend(self, step: int) -> LentSnapshot | None:
        """The snapshot of `step`, lent to a checkpoint of the same step to stage from
        (`staging`), when it holds this rank's whole state; its slot is not written again until
        the borrower returns it. None: no such snapshot (the checkpoint copies the state)."""
        if self._taken is None or self._taken[1].step != step:
            return None
        slot, lent = self._taken
        self._lent[slot.data] = lent
        return lent

    def _layout(self, tensors: list[torch.Tensor]) -> tuple[tuple[arena.Entry, ...], int]:
        """`arena.layout`, kept while every tensor's dtype and shape are: the same entries
        let each slot keep its views (`Slot.tensors`)."""
        key = tuple((tensor.dtype, tensor.shape) for tensor in tensors)
        if self._laid_out is None or self._laid_out[0] != key:
            self._laid_out = key, *arena.layout(tensors)
        return self._laid_out[1], self._laid_out[2]

    def _take(self, header: Header, tensors: list[torch.Tensor],
              target: tuple[Slot, LentSnapshot | None], copied: Copied,
              keep_copy: bool) -> None:  # fmt: skip
        """The background job (`background`): the copy, then `_finish`."""
        self._finish(header, self._write(header, tensors, target, copied), keep_copy)

    def _write(self, header: Header, tensors: list[torch.Tensor],
               target: tuple[Slot, LentSnapshot | None],
               copied: Copied) -> tuple[Slot, torch.Tensor] | None:  # fmt: skip
        """Copy into the target's slot (once the checkpoint an earlier snapshot in it was lent
        to has returned it; invalidated first); `copied` is resolved once the state may change
        again, whatever happened: the slot's bytes, or None. The slot and its bytes; None if it
        failed."""
        data = None
        slot, returning = target
        try:
            if returning is not None:
                returning.returned.wait()
            slot.invalidate()
            self._copy(slot.tensors(header.entries, header.size), tensors)
            data = slot.buffer(header.size)
            return slot, data
        except BaseException as error:  # a full tmpfs: storage checkpoints still work
            self._error, data = error, None
            return None
        finally:
            copied.set_result(data)

    def _finish(self, header: Header, written: tuple[Slot, torch.Tensor] | None,
                keep_copy: bool) -> None:  # fmt: skip
        """Commit the slot, then (sharded states) send it to the buddy and keep the keeper's."""
        sent: Header | None = None
        if written is not None:
            try:
                written[0].commit(header)
                sent = header
            except BaseException as error:
                self._error = error
        roles, group = self._roles, self._group
        if keep_copy and roles is not None and group is not None:
            try:
                data = written[1] if written is not None and sent is not None else None
                keep = arena.older(self.kept_slots()) if roles.keeps_for is not None else None
                wire.exchange(roles, sent, data, keep, group)
            except BaseException as error:
                self._error = self._error or error

    def _copy(self, targets: list[torch.Tensor], sources: list[torch.Tensor]) -> None:
        if not sources:
            return
        if devices.device().type != "cuda":
            torch._foreach_copy_(targets, sources)
            return
        if self._stream is None:
            self._stream = torch.cuda.Stream(devices.device())  # type: ignore[no-untyped-call]
        with torch.cuda.stream(self._stream):
            torch._foreach_copy_(targets, sources, non_blocking=True)
        self._stream.synchronize()

    def wait_staged(self) -> None:
        """Block until an in-flight snapshot has copied the state (call before changing it); a
        failed copy is the job's to report."""
        copied, self._copied = self._copied, None
        if copied is not None:
            copied.result()

    def wait(self) -> None:
        """Let an in-flight snapshot finish; a failed one is logged, not fatal."""
        self._copied = None
        job, self._job = self._job, None
        if job is not None:
            job.result()
        if self._error is not None:
            log.warning("memory snapshot not written: %s", self._error)
            self._error = None

    def close(self) -> None:
        """Finish an in-flight snapshot and unmap the slots (their files stay in the pod)."""
        self.wait()
        if self._worker is not None:
            self._worker.shutdown()
            self._worker = None
        if self.enabled:
            for slot in (*self.own_slots(), *self.kept_slots()):
                slot.release()

    # loading --------------------------------------------------------------------------------
    def load(self, state: Any, storage_step: int | None) -> int | None:
        """Load the step `recall.choose` picks (its units from this pod's memory or sent by the
        peers that hold them) when it is not older than `storage_step`, the newest valid
        checkpoint on storage: that step, or None (every rank loads from storage)."""
        held = recall.held(self.directory if self.enabled else None)
        loaded = recall.load(state, storage_step, held, self.part, self.process_group, self._group)
        self.source = loaded[1] if loaded is not None else None
        return loaded[0] if loaded is not None else None

    def discard_newer_than(self, step: int | None) -> None:
        """Invalidate this rank's slots (its own and the copies it keeps) of steps after `step`,
        the step the job resumed from (None: a fresh start, all of them). They belong to a run
        that was abandoned: kept, a later failure could resume from them before this run's own
        snapshots replace them."""
        if not self.enabled:
            return
        for slot in (*self.own_slots(), *self.kept_slots()):
            held = slot.step()
            if held is not None and (step is None or held > step):
                slot.invalidate()

    def assign(self) -> wire.Roles:
        """Every rank's pod and part, learnt once by a collective (`Resumable` asks at its
        start, so that no snapshot call from inside a step, such as `prepare`, is one)."""
        if self._roles is None:
            place = (f"{socket.gethostname()}:{self._directory.resolve()}", self.part)
            places, rank = [place], 0
            if dist.is_initialized():
                places = [("", "")] * dist.get_world_size(self.process_group)
                dist.all_gather_object(places, place, group=self.process_group)
                rank = dist.get_rank()
            self._roles = wire.roles(rank, places)
        return self._roles

    def _slots(self, name: str) -> tuple[Slot, Slot]:
        if name not in self._slot_cache:
            pin = devices.device().type == "cuda"
            first, second = (Slot(self._directory, f"{name}.{k}", pin) for k in (0, 1))
            self._slot_cache[name] = first, second
        return self._slot_cache[name]

    @property
    def _group(self) -> dist.ProcessGroup | None:
        """The snapshot group, or the default one; None without a process group."""
        if self.process_group is not None or not dist.is_initialized():
            return self.process_group
        return dist.group.WORLD

    @property
    def _directory(self) -> Path:
        assert self.directory is not None
        return self.directory


def _snapshot_state(stateful: Any) -> Any:
    """The state to snapshot: the stateful's `snapshot_state_dict()` when it has one (AppState:
    the same state, its tensor names kept from one snapshot to the next), else `state_dict()`."""
    snapshot = getattr(stateful, "snapshot_state_dict", None)
    return snapshot() if callable(snapshot) else stateful.state_dict()
