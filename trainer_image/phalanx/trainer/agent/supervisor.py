"""Run a node's workers as a gang: one worker failing stops the others, and the pod's exit code
says what happened (see phalanx.models.exits)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.models import exits

POLL_SECONDS = 0.1


@dataclass
class Outcome:
    """How the gang ended: the pod's exit code and a one-line reason for the termination message."""

    code: int
    message: str


@dataclass
class Worker:
    local_rank: int
    rank: int
    process: subprocess.Popen[bytes]
    error_file: Path


@dataclass
class Supervisor:
    workers: list[Worker] = field(default_factory=list)
    stop_grace_seconds: float = 10.0

    def spawn(
        self, argv: list[str], env: dict[str, str], local_rank: int, rank: int, error_file: Path
    ) -> None:
        process = subprocess.Popen(argv, env=env, start_new_session=True)
        self.workers.append(Worker(local_rank, rank, process, error_file))

    def signal_all(self, signum: int) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.process.pid, signum)

    def wait(self, tick: object = None) -> Outcome:
        """Until all workers exit 0, or one fails; `tick()` runs at each poll."""
        while True:
            codes = [w.process.poll() for w in self.workers]
            failed = [w for w, c in zip(self.workers, codes, strict=True) if c not in (None, 0)]
            if failed:
                return self._stop_after(failed[0])
            if all(c == 0 for c in codes):
                return Outcome(exits.OK, f"all {len(self.workers)} workers exited 0")
            if callable(tick):
                tick()
            time.sleep(POLL_SECONDS)

    def wait_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for worker in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        self.signal_all(signal.SIGKILL)
        for worker in self.workers:
            worker.process.wait()

    def _stop_after(self, first: Worker) -> Outcome:
        """One worker failed: stop the rest of the gang and classify the first failure."""
        self.signal_all(signal.SIGTERM)
        self.wait_all(self.stop_grace_seconds)
        code = first.process.returncode
        detail = first.error_file.read_text().strip() if first.error_file.exists() else ""
        if code < 0:  # killed by a signal
            name = signal.Signals(-code).name
            return Outcome(exits.SIGNAL_BASE - code, f"worker rank {first.rank} killed by {name}")
        if code in exits.INFRASTRUCTURE_CODES or exits.killed_by_signal(code):
            return Outcome(code, detail or f"worker rank {first.rank} exited {code}")
        return Outcome(exits.APPLICATION, detail or f"worker rank {first.rank} exited {code}")
