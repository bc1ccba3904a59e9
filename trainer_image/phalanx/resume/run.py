"""`Resumable`: the reference trainer's resumability for any torch script, in about ten lines.

    from phalanx.resume import Resumable

    run = Resumable(model, optimizer, dataset_size=len(data), global_batch=64)
    run.resume()                                   # newest valid checkpoint, resharded
    while run.step < steps:
        ids = run.batch()                          # this rank's sample ids for the next step
        loss = loss_fn(model(data[ids]))
        loss.backward()
        optimizer.step()                           # waits for an async save's copy first
        optimizer.zero_grad()
        run.step_done(loss.item())                 # saves on the spec's cadence, reports
    run.finish()                                   # the last save, committed

What it keeps: every sample once and the global batch the same at any world size (the global
sampler: a rank takes its share of the next `global_batch` samples); model, optimizer, step,
sample position and RNG in a DCP checkpoint that loads into any world size; saves in the
background, committed atomically, the newest valid one never deleted; snapshots in the pod's
memory when the agent gives it a memory directory, so a restart in place resumes without
reading storage. The cadence, retention and location come from the job's spec
(`spec.checkpoint`, through `CheckpointSettings.from_env`), and committed checkpoints and steps
are reported to the job's status through `phalanx.progress`.

A script keeps its own model, optimizer, data and loss. The gradient is the exact global mean
when every rank's share has the same size (a global batch that the data-parallel degree
divides); the reference trainer weights uneven shares itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import torch
import torch.distributed as dist
from torch import nn
from torch.optim import Optimizer

from phalanx import progress
from phalanx.models import env, exits
from phalanx.resume import devices
from phalanx.resume.cadence import SnapshotCadence
from phalanx.resume.checkpoint import CheckpointManager, CheckpointSaveError
from phalanx.resume.collectives import set_collective_timeout
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.sampler import GlobalSampler, split
from phalanx.resume.settings import CheckpointSettings
from phalanx.resume.state import AppState, TrainingProgress

log = logging.getLogger(__name__)

DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 300
"""The group's timeout after the first step when spec.nccl.timeoutSeconds is unset: a hung peer
is found in 5 minutes, not torch's 10 (NCCL) or 30 (gloo)."""


class Resumable:
    """One worker's view of a resumable run: counters, sampler, checkpoints and snapshots."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: Optimizer,
        *,
        dataset_size: int,
        global_batch: int,
        seed: int = 0,
        settings: CheckpointSettings | None = None,
        data_parallel: tuple[int, int] | None = None,
        part: str = "model",
        reporter: progress.Reporter | None = None,
        total_steps: int | None = None,
    ) -> None:
        """`data_parallel`: (degree, this rank's index) when model parallelism makes it differ
        from (world size, rank). `part`: which part of the model this rank holds (pipeline
        stages), so memory snapshots go to ranks of the same part. `reporter`: where steps and
        checkpoints are reported (phalanx.progress's own by default). `total_steps`: the steps
        the script means to train, reported for the job's ETA."""
        if global_batch < 1 or dataset_size < 1:
            raise ValueError(
                f"global_batch ({global_batch}) and dataset_size ({dataset_size}) must be >= 1"
            )
        self.settings = settings or CheckpointSettings.from_env()
        self.total_steps = total_steps
        self.global_batch = global_batch
        rank, world = _rank_and_world()
        self.dp_size, self.dp_rank = data_parallel or (world, rank)
        self.progress = TrainingProgress()
        self.sampler = GlobalSampler(dataset_size, global_batch, seed)
        self.state = AppState(model, optimizer, self.progress)
        self.reporter = reporter or progress.default_reporter()
        group = _side_group()  # checkpoint collectives: never racing training's
        snapshot_group = _side_group()  # snapshots' buddy copies run beside a checkpoint's
        self.checkpoints = CheckpointManager(
            self.settings.location, self.settings.keep, self.settings.async_save, group,
            on_commit=self._committed,
        )  # fmt: skip
        memory = self.settings.memory_dir
        self.memory = MemorySnapshots(
            Path(memory) if memory else None,
            self.settings.memory_interval_steps,
            int(os.environ.get(env.LOCAL_RANK, "0")),
            snapshot_group,
            part=part,
        )
        self.cadence = SnapshotCadence(
            self.settings.memory_interval_steps if self.memory.enabled else 0,
            self.settings.memory_overhead_percent,
        )
        self.source: str | None = None
        """Where `resume` loaded from: "memory", "peer", "storage", or None (a fresh start)."""
        self.resumed_from: int | None = None
        self._preempted = False
        self._last_save = time.monotonic()
        self._steps_this_run = 0
        self._loading = False
        self._step_ended: float | None = None
        optimizer.register_step_pre_hook(lambda *_: self.wait_staged())
        if self.memory.enabled:
            self.memory.assign()
        self._prepare_hook = optimizer.register_step_post_hook(lambda *_: self._prepare_memory())
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)

    # where the run is -------------------------------------------------------------------------
    @property
    def step(self) -> int:
        """Optimizer steps completed by the whole job, across restarts."""
        return self.progress.step

    @property
    def position(self) -> int:
        """Samples the whole job consumed so far."""
        return self.progress.position

    @property
    def data_epoch(self) -> int:
        return self.sampler.data_epoch(self.progress.position)

    def batch(self) -> list[int]:
        """This rank's sample ids for the next step: its share of the next `global_batch`."""
        return split(self.sampler.batch(self.progress.position), self.dp_size, self.dp_rank)

    # resuming -------------------------------------------------------------------------------
    def can_resume(self) -> bool:
        """Whether `resume` will load something (a committed checkpoint or a memory snapshot)."""
        return self.checkpoints.newest_valid() is not None or self.memory.holds_any()

    def resume(self) -> int | None:
        """Load the newest state: the newest memory snapshot every rank holds (replicated: any
        peer holds) when it is not older than storage's newest valid checkpoint, else that
        checkpoint, resharded to this world size. Snapshots newer than the step resumed from are
        dropped. The step it resumed from, or None for a fresh start."""
        self._loading = True  # loading may step the optimizer: DCP makes its state so
        try:
            step = self.memory.load(self.state, self.checkpoints.newest_valid())
            source = self.memory.source
            if step is None:
                step, source = self.checkpoints.load_latest({"app": self.state}), "storage"
        finally:
            self._loading = False
        self.memory.discard_newer_than(step)
        self.resumed_from, self.source = step, source if step is not None else None
        return step

    # each step -------------------------------------------------------------------------------
    def step_done(self, loss: float | None = None, *, report: bool = True) -> None:
        """Call on every rank after each optimizer step: counts it, saves when the spec's
        cadence says so (every `interval_steps`, or `interval_seconds` after the last save on
        any rank's clock), snapshots into memory (`cadence`; and at a checkpoint's step, which
        stages from the snapshot), and on SIGTERM saves and exits. With `report`, the step (and
        `loss`) goes to the job's status."""
        if self._step_ended is not None:
            self.cadence.step_took(time.monotonic() - self._step_ended)
        self.progress.step += 1
        self.progress.position += self.global_batch
        self._steps_this_run += 1
        if self._steps_this_run == 1:  # every peer is here: a hung collective is now a fault
            set_collective_timeout(
                self.settings.collective_timeout_seconds or DEFAULT_COLLECTIVE_TIMEOUT_SECONDS
            )
            self._prepare_hook.remove()  # not from within the hook: the optimizer iterates them
        if report:
            resumed = {"step": self.resumed_from, "source": self.source}
            self.reporter.report(
                self.progress.step, loss, self.global_batch, total_steps=self.total_steps,
                extra={"resumed": {k: v for k, v in resumed.items() if v is not None}},
            )  # fmt: skip
        step = self.progress.step
        on_cadence = step % self.settings.interval_steps == 0
        preempted, overdue, snapshot = self._agree(
            self.cadence.due(step) or (on_cadence and self.memory.lends)
        )
        checkpoint = on_cadence or overdue
        if snapshot:  # first: a checkpoint of this step stages from it
            started = time.monotonic()
            self.memory.maybe_save(step, self.state, due=True)
            counted = not checkpoint and not self.memory.first_use
            self.cadence.snapshot_took(time.monotonic() - started, counted=counted)
        if checkpoint:
            with self._blocked_by_save():
                self._going_on(self.checkpoints.wait)  # the last save's failure told
                self._going_on(self._save_periodic)  # and this one tried
        self._going_on(self.checkpoints.poll)
        self._step_ended = time.monotonic()
        if preempted:  # a rank's pod is being stopped: every rank saves this step and stops
            with self.reporter.saving(self.progress.step):
                self.save(blocking=True)
                self.close()
            sys.exit(exits.SIGNAL_BASE + signal.SIGTERM if self._preempted else exits.CHECKPOINTED)

    def _prepare_memory(self) -> None:
        """At the end of a fresh run's first optimizer step, when the optimizer's state exists
        and so the snapshot's size is known: this rank's snapshot slots are made now, once, as
        the optimizer made its own state, not beside later steps (`MemorySnapshots.prepare`).
        A resumed run's first step ends its recovery, which this would lengthen by seconds at
        real sizes: its empty slots are made by its first snapshots into them instead (the
        cadence does not count those)."""
        if self.resumed_from is None and self._steps_this_run == 0 and not self._loading:
            self.memory.prepare(self.state)

    def _blocked_by_save(self) -> contextlib.AbstractContextManager[None]:
        """`reporter.saving` around a periodic save when it blocks training: a sync save, or
        one that first waits for the last save's upload. An async save only starts its
        upload and returns, so it is not reported: the report's closing heartbeat write, right
        after the upload thread started, was much of what a checkpoint step cost beyond
        torchrun's same save (docs/figures.md, "Checkpoints")."""
        if self.settings.async_save and not self.checkpoints.uploading():
            return contextlib.nullcontext()
        return self.reporter.saving(self.progress.step)

    def wait_staged(self) -> None:
        """Block until an in-flight save's or snapshot's copy of the state is taken (the
        optimizer step calls it: it is the first thing that changes the saved tensors)."""
        self._going_on(self.checkpoints.wait_staged)
        self.memory.wait_staged()

    def _going_on(self, action: Callable[[], None]) -> None:
        """Run a step of a periodic save; if the save fails (a full volume, a lost mount), say
        so and train on: the last committed checkpoint stays the one to resume from (it is
        never deleted for a failed one), memory snapshots go on, and the next save tries again.
        Stopping would not free the volume, and every restart would redo work. (The final save
        and the one on SIGTERM still raise: without them the job's end state is lost.)"""
        try:
            action()
        except CheckpointSaveError as error:
            log.warning("%s; training goes on from the last committed checkpoint", error)
            self.reporter.checkpoint_failed(error.step, str(error))

    def save(self, *, blocking: bool = False) -> None:
        """Checkpoint now (in the background unless `blocking` or spec.checkpoint.async is off)."""
        self._last_save = time.monotonic()
        self.checkpoints.save(self.progress.step, {"app": self.state}, blocking=blocking)

    def _save_periodic(self) -> None:
        """`save` on the cadence, staged from this step's memory snapshot when there is one
        (`staging`: the snapshot's copy serves the checkpoint too)."""
        self._last_save = time.monotonic()
        step = self.progress.step
        self.checkpoints.save(step, {"app": self.state}, snapshot=self.memory.lend(step))

    def _committed(self, step: int, location: str) -> None:
        """A save committed: how long it took (for the hang timeout of the next blocking one)
        and where it is (the job's status)."""
        self.reporter.saved(time.monotonic() - self._last_save)
        self.reporter.checkpoint(step, location)

    def finish(self) -> None:
        """The last save, if the cadence did not just make one, committed; then `close`."""
        with self.reporter.saving(self.progress.step):
            if self.progress.step % self.settings.interval_steps:
                self.save(blocking=True)
            self.close()

    def close(self) -> None:
        """Let in-flight saves and snapshots finish and free their host buffers."""
        self.checkpoints.close()
        self.memory.close()

    def _on_sigterm(self, *_: object) -> None:
        self._preempted = True

    def _agree(self, snapshot: bool) -> tuple[bool, bool, bool]:
        """One collective per step for what every rank must decide alike: is any rank being
        preempted (SIGTERM), has any rank's clock passed interval_seconds since the last save
        (the clocks differ a little; a save is a collective), and does any rank's `cadence` (its
        own measure of what a snapshot costs) say a memory snapshot is due (a snapshot is whole
        only when every rank's part is of the same step)."""
        limit = self.settings.interval_seconds
        overdue = limit is not None and time.monotonic() - self._last_save >= limit
        if not dist.is_initialized():
            return self._preempted, overdue, snapshot
        flags = torch.tensor(
            [int(self._preempted), int(overdue), int(snapshot)], device=devices.for_group()
        )
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0].item()), bool(flags[1].item()), bool(flags[2].item())


def _side_group() -> dist.ProcessGroup | None:
    """A gloo group of all ranks (every rank creates it, in the same order), or None alone."""
    if not dist.is_initialized():
        return None
    return cast(dist.ProcessGroup, dist.new_group(backend="gloo"))


def _rank_and_world() -> tuple[int, int]:
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get(env.RANK, "0")), int(os.environ.get(env.WORLD_SIZE, "1"))
