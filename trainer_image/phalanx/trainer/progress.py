"""The heartbeat the reference trainer's rank 0 reports (its resumable counters are the resume
library's `phalanx.resume.state.TrainingProgress`)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from phalanx.models.heartbeat import Resume, StartupTimes
from phalanx.progress import Reporter


class HeartbeatWriter:
    """Global rank 0's report: step, loss, throughput, per-rank step and compute times, last
    checkpoint. The public `phalanx.progress.Reporter` does the work (one writer of the
    heartbeat for every program); this adds what only the reference trainer knows."""

    def __init__(self, epoch: int, path: Path | None = None) -> None:
        self.reporter = Reporter(path, epoch)
        self.startup: StartupTimes | None = None
        self.resumed: Resume | None = None

    @property
    def path(self) -> Path | None:
        return self.reporter.path

    def compute(self) -> AbstractContextManager[None]:
        """Time this rank's own work in the step (see `Reporter.compute`)."""
        return self.reporter.compute()

    def step_done(
        self,
        step: int,
        loss: float,
        samples: int,
        data_epoch: int,
        total_steps: int,
        gather_every: int = 10,
    ) -> None:
        """Call on every rank after each step (it gathers the ranks' times every
        `gather_every`, and after this run's first step, which arms the hang timeout)."""
        extra: dict[str, Any] = {"dataEpoch": data_epoch}
        for name, value in (("startup", self.startup), ("resumed", self.resumed)):
            if value is not None:
                extra[name] = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.reporter.report(
            step, loss, samples, sync_ranks=True, gather_every=gather_every,
            total_steps=total_steps, extra=extra,
        )  # fmt: skip

    def checkpointed(self, step: int, path: str) -> None:
        self.reporter.checkpoint(step, path)
