"""`phalanx.progress`: how any training script tells Phalanx how it goes. Standard library only.

    import phalanx.progress as progress

    for step in range(start, steps):
        with progress.compute():           # optional: this rank's own work, for stragglers
            loss = model(batch).backward()
        optimizer.step()
        progress.report(step + 1, loss=loss.item(), total_steps=steps)  # every rank, or rank 0
        if saved:
            progress.checkpoint(step + 1, path)        # after the checkpoint is committed

What a script gets for it (the agent publishes what global rank 0 writes; see the README's
table, "Your own training script"): the job's step, loss and throughput in its status, metrics
and summary; hang detection (a step that stops advancing restarts the gang); recovery measured
to the first step after a restart; the newest checkpoint in the status. With `sync_ranks=True`
on every rank, each rank's step and compute times too, so a slow rank (a straggler) is found and
its node avoided. Once every worker of a pod entered a phase (`phase`, or the first `report`),
its agent judges it as it judges the reference trainer (phalanx.agent.liveness). Without
these calls the job's status says that the program reports no steps, instead of figures.
It needs the agent (the image's entrypoint, `args: [python, script.py]`): under torchrun or as
the container's command nothing reads what it writes, and its calls do nothing.

Why no dependencies: a script imports this without torch's or Phalanx's other packages being
importable, and a call outside a Phalanx pod (no PHALANX_PROGRESS_FILE) does nothing, so the same
script runs anywhere. Why a file: the agent never imports torch and must keep working while its
workers are busy or frozen, so it reads what rank 0 wrote instead of asking it.

Why `sync_ranks` is opt-in: it runs a collective (an all-gather every `gather_every` steps), which
every rank must call, like Lightning's `log(..., sync_dist=True)`. A script that reports from
rank 0 alone would hang in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

UTC = timezone.utc  # noqa: UP017 (datetime.UTC is Python 3.11+; this runs in any image)

# The names in phalanx.models.env; repeated here, not imported, so that this module needs
# nothing but the standard library (tests/unit/test_progress_api.py checks they agree).
PROGRESS_FILE_ENV = "PHALANX_PROGRESS_FILE"
PHASE_FILE_ENV = "PHALANX_PHASE_FILE"
EPOCH_ENV = "PHALANX_EPOCH"
RANK_ENV = "RANK"

PHASES = ("rendezvous", "loading", "first-step", "training")
"""A worker's start-up phases, in order (phalanx.models.assignment.AgentPhase)."""

WINDOW = 20
"""Steps each rank's step and compute times cover: the mean step time (for the hang timeout,
which must allow for the slow steps, such as one that stages a checkpoint) and the median compute
time (for stragglers, which must not be a few slow steps: a rank's warm-up after a restart, a
checkpoint's copy, the scheduler's noise on a busy machine)."""


def phase(name: str) -> None:
    """Tell the agent this worker entered a start-up phase (rendezvous, loading, first-step,
    training). With phases reported, an epoch stuck in its start is found by the operator's
    start-up timeout, and the phase is named in the event. `report` enters `training` itself."""
    if name not in PHASES:
        raise ValueError(f"phase {name!r} is not one of {', '.join(PHASES)}")
    if path := os.environ.get(PHASE_FILE_ENV):
        _write_atomically(Path(path), name)


class Reporter:
    """One worker's progress: step times and compute times over a window, and, on global rank
    0, the heartbeat file its agent publishes. `report`, `checkpoint` and `compute` use one of
    these per process."""

    def __init__(self, path: Path | None = None, epoch: int | None = None) -> None:
        named = os.environ.get(PROGRESS_FILE_ENV)
        self.path = path if path is not None else Path(named) if named else None
        self.epoch = epoch if epoch is not None else int(os.environ.get(EPOCH_ENV, "0"))
        self.step_times: deque[float] = deque(maxlen=WINDOW)
        self.compute_times: deque[float] = deque(maxlen=WINDOW)
        self.steady_times: deque[float] = deque(maxlen=WINDOW)
        """Step times after this process's first (which includes its start-up): rank 0's own
        step time in the heartbeat, for the ETA."""
        self.rank_step_seconds: list[float] = []
        self.rank_compute_seconds: list[float] = []
        self.window_steps = 0
        self.checkpoint_ref: dict[str, Any] | None = None
        self.checkpoint_error: dict[str, Any] | None = None
        self.saving_now: dict[str, Any] | None = None
        self.saved_at: str | None = None
        self.save_seconds: float | None = None
        self._beat: dict[str, Any] | None = None
        """The heartbeat last written (global rank 0 only)."""
        self._last = time.monotonic()
        self._computing = 0.0
        self._device_spans: list[_DeviceSpan] = []
        self._reported = False

    @contextlib.contextmanager
    def compute(self) -> Iterator[None]:
        """Time this rank's own work in a step: the forward and backward passes, not the time
        it waits for its peers in collectives. Several blocks in one step add up. On a GPU the
        kernels a block launches run after it returns, so the wall clock would time only their
        launch: the block is timed with CUDA events instead (read at the step's report)."""
        span = _DeviceSpan.begin()
        start = time.monotonic()
        try:
            yield
        finally:
            if span is not None:
                self._device_spans.append(span.end())
            else:
                self._computing += time.monotonic() - start

    def report(
        self,
        step: int,
        loss: float | None = None,
        samples: int | None = None,
        *,
        sync_ranks: bool = False,
        gather_every: int = 10,
        total_steps: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Step `step` completed (counting from 1). `samples`: how many the whole job put
        through in it (for throughput). `total_steps`: how many it means to train (the job's
        ETA). `extra`: more heartbeat fields (the reference trainer's data epoch, start-up
        times). See the module's docstring for `sync_ranks`."""
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        self._computing += sum(span.seconds() for span in self._device_spans)
        self._device_spans.clear()
        self.step_times.append(elapsed)
        if self._reported:
            self.steady_times.append(elapsed)
        if self._computing > 0:
            self.compute_times.append(self._computing)
        self._computing = 0.0
        if not self._reported:
            self._reported = True
            phase("training")
        first = len(self.step_times) == 1  # a first step time arms the adaptive hang timeout
        if sync_ranks and (first or step % gather_every == 0):
            self._gather()
        if self.path is None or _global_rank() != 0:
            return
        beat: dict[str, Any] = {
            "epoch": self.epoch,
            "step": step,
            "loss": loss,
            "samplesPerSecond": samples / elapsed if samples and elapsed > 0 else None,
            "stepSeconds": steady if (steady := _mean(self.steady_times)) > 0 else None,
            "totalSteps": total_steps if total_steps and total_steps > 0 else None,
            "rankStepSeconds": self.rank_step_seconds,
            "rankComputeSeconds": self.rank_compute_seconds,
            "windowSteps": self.window_steps,
            "checkpoint": self.checkpoint_ref,
            "checkpointError": self.checkpoint_error,
            "saving": self.saving_now,
            "savedAt": self.saved_at,
            "saveSeconds": self.save_seconds,
            **(extra or {}),
        }
        self._beat = beat
        self._write()

    def checkpoint(self, step: int, path: str) -> None:
        """A checkpoint of step `step` is committed at `path` (a directory or URL): the job's
        status names it, and restarts are known to resume from it. Call it once the save is
        complete, not when it starts."""
        previous = self.checkpoint_ref["step"] if self.checkpoint_ref else None
        self.checkpoint_ref = {
            "step": step,
            "path": path,
            "time": _now(),
            # the cadence, as this process kept it: a heartbeat may skip a checkpoint
            "previousStep": previous if previous is not None and previous < step else None,
        }
        self.checkpoint_error = None
        if self._beat is not None:  # at once: a script may save at its last step, then exit
            self._beat["checkpoint"] = self.checkpoint_ref
            self._beat["checkpointError"] = None
            self._write()

    def checkpoint_failed(self, step: int | None, message: str) -> None:
        """A save of step `step` failed and training goes on without it: the job's status says
        so (CheckpointFailing) until a save commits again."""
        self.checkpoint_error = {
            "step": step,
            "message": message[-2048:],
            "time": _now(),
        }
        if self._beat is not None:
            self._beat["checkpointError"] = self.checkpoint_error
            self._write()

    @contextlib.contextmanager
    def saving(self, step: int) -> Iterator[None]:
        """Training is blocked by a checkpoint save of step `step` (a blocking save, the final
        one, a wait for the previous save's upload): the job's status knows, and its hang
        timeout allows a save longer than a step (3 x the last save's time, at least 2 min), so
        that a long save is not taken for a hang. Nested blocks count as the outer one."""
        if self.saving_now is not None:
            yield
            return
        self._set_saving({"step": step, "since": _now()})
        try:
            yield
        finally:
            self.saved_at = _now()
            if self._beat is not None:
                self._beat["savedAt"] = self.saved_at
            self._set_saving(None)

    def saved(self, seconds: float) -> None:
        """The last save took `seconds` from its start to its commit."""
        self.save_seconds = round(seconds, 3)
        if self._beat is not None:
            self._beat["saveSeconds"] = self.save_seconds

    def _set_saving(self, saving: dict[str, Any] | None) -> None:
        self.saving_now = saving
        if self._beat is not None:
            self._beat["saving"] = saving
            self._write()

    def _write(self) -> None:
        if self.path is not None and self._beat is not None:
            beat = {k: v for k, v in self._beat.items() if v is not None}
            _write_atomically(self.path, json.dumps(beat))

    def _gather(self) -> None:
        """Every rank's mean step time and median compute time (a collective: all ranks call it)."""
        dist = sys.modules.get("torch.distributed")
        mine = [_mean(self.step_times), _median(self.compute_times)]
        if dist is None or not dist.is_initialized():
            self.rank_step_seconds, self.rank_compute_seconds = [mine[0]], _known([mine[1]])
            self.window_steps = len(self.step_times)
            return
        torch = sys.modules["torch"]
        device = (
            torch.device("cuda", torch.cuda.current_device())
            if dist.get_backend() == "nccl"
            else torch.device("cpu")
        )
        local = torch.tensor(mine, dtype=torch.float64, device=device)
        gathered = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, local)
        rows = [[float(value) for value in row.tolist()] for row in gathered]
        self.rank_step_seconds = [row[0] for row in rows]
        self.rank_compute_seconds = _known([row[1] for row in rows])
        self.window_steps = len(self.step_times)


class _DeviceSpan:
    """A compute block on the GPU, between two CUDA events: the time its kernels ran, known once
    they finished (the step's report waits for the end event; by then the step's own
    synchronisation, a loss's `.item()` or the optimizer's collectives, has usually passed it)."""

    def __init__(self, torch: Any) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._start.record()

    @classmethod
    def begin(cls) -> _DeviceSpan | None:
        """A span on this process's current CUDA device; None when it computes on the CPU
        (torch not imported, no CUDA, or CUDA never initialised by this process: timing must
        not start a CUDA context in a CPU program)."""
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        return cls(torch)

    def end(self) -> _DeviceSpan:
        self._end.record()
        return self

    def seconds(self) -> float:
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end)) / 1000.0


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _mean(values: deque[float]) -> float:
    return sum(values) / len(values) if values else -1.0


def _median(values: deque[float]) -> float:
    return statistics.median(values) if values else -1.0


def _known(values: list[float]) -> list[float]:
    """The compute times, or none when a rank did not time its compute (-1)."""
    return values if all(value >= 0 for value in values) else []


def _global_rank() -> int:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        return int(dist.get_rank())
    return int(os.environ.get(RANK_ENV, "0"))


def _write_atomically(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):  # a report that cannot be written must not stop training
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)


_reporter: Reporter | None = None


def default_reporter() -> Reporter:
    """This process's reporter, the one `report`, `checkpoint` and `compute` use."""
    global _reporter
    if _reporter is None:
        _reporter = Reporter()
    return _reporter


def report(
    step: int,
    loss: float | None = None,
    samples: int | None = None,
    *,
    sync_ranks: bool = False,
    total_steps: int | None = None,
) -> None:
    """Step `step` completed; see `Reporter.report`."""
    default_reporter().report(step, loss, samples, sync_ranks=sync_ranks, total_steps=total_steps)


def checkpoint(step: int, path: str) -> None:
    """A checkpoint of step `step` is committed at `path`; see `Reporter.checkpoint`."""
    default_reporter().checkpoint(step, path)


def checkpoint_failed(step: int | None, message: str) -> None:
    """A save of step `step` failed, training goes on; see `Reporter.checkpoint_failed`."""
    default_reporter().checkpoint_failed(step, message)


def saving(step: int) -> contextlib.AbstractContextManager[None]:
    """A checkpoint save of step `step` blocks training; see `Reporter.saving`."""
    return default_reporter().saving(step)


def compute() -> contextlib.AbstractContextManager[None]:
    """Time this rank's own work in a step; see `Reporter.compute`."""
    return default_reporter().compute()
