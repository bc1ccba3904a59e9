"""Training progress: the resumable counters (a DCP Stateful) and the heartbeat rank 0 reports.

Everything resumable is one object (torchtune's TrainingProgress habit): the step, the global
sample position, the world size at save, and the RNG state ride inside every checkpoint.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from phalanx.models import env
from phalanx.models.heartbeat import Heartbeat, Resume, StartupTimes
from phalanx.models.status import CheckpointRef

PROGRESS_FILE_ENV = env.PHALANX_PROGRESS_FILE


@dataclass
class TrainingProgress:
    """The counters a resumed run continues from."""

    step: int = 0
    position: int = 0
    """Samples the whole job consumed so far: the global sampler's state."""
    world_size_at_save: int = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "position": self.position,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "rng": torch.get_rng_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.position = int(state["position"])
        self.world_size_at_save = int(state["world_size"])
        torch.set_rng_state(state["rng"])


@dataclass
class HeartbeatWriter:
    """Global rank 0's report: step, loss, throughput, per-rank step times, last checkpoint."""

    epoch: int
    window: int = 20
    path: Path | None = field(
        default_factory=lambda: Path(p) if (p := os.environ.get(PROGRESS_FILE_ENV)) else None
    )
    _times: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    _last: float = field(default_factory=time.monotonic)
    checkpoint: CheckpointRef | None = None
    startup: StartupTimes | None = None
    resumed: Resume | None = None

    def step_done(
        self, step: int, loss: float, samples: int, data_epoch: int, gather_every: int = 10
    ) -> None:
        """Call on every rank after each step (it gathers step times every `gather_every`)."""
        now = time.monotonic()
        self._times.append(now - self._last)
        elapsed, self._last = now - self._last, now
        rank_times: list[float] = []
        first = len(self._times) == 1  # this run's first step: the hang timeout needs a step time
        if dist.is_initialized() and (first or step % gather_every == 0):
            mine = torch.tensor([sum(self._times) / len(self._times)], dtype=torch.float64)
            gathered = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
            dist.all_gather(gathered, mine)
            rank_times = [float(t.item()) for t in gathered]
        if self.path is None or (dist.is_initialized() and dist.get_rank() != 0):
            return
        beat = Heartbeat(
            epoch=self.epoch,
            step=step,
            data_epoch=data_epoch,
            samples_per_second=samples / elapsed if elapsed > 0 else None,
            loss=loss,
            rank_step_seconds=rank_times,
            window_steps=len(self._times) if rank_times else 0,
            checkpoint=self.checkpoint,
            startup=self.startup,
            resumed=self.resumed,
        )
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(beat.model_dump_json(by_alias=True, exclude_none=True))
        tmp.replace(self.path)

    def checkpointed(self, step: int, path: str) -> None:
        self.checkpoint = CheckpointRef(step=step, path=path, time=datetime.now(UTC))
