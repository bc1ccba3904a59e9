"""Run a node's workers as a gang: one worker failing stops the others, and the pod's exit code
says what happened (see phalanx.models.exits)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.agent import oom
from phalanx.agent.warm import Launcher, WorkerProcess, signal_worker
from phalanx.models import env, exits
from phalanx.models.env import PHALANX_WORKER_ERROR_FILE, TORCHELASTIC_ERROR_FILE

POLL_SECONDS = 0.05
STOPPED_SECONDS = env.STOPPED_WORKER_SECONDS
"""How long a worker may stay stopped (SIGSTOP, job control) before the gang fails: nothing in
training stops a process, so one that stays stopped is frozen (a debugger's ptrace stop is
another state, 't'). spec.failurePolicy.hangTimeoutSeconds sets it
(PHALANX_HANG_TIMEOUT_SECONDS)."""
STOPPED_CHECK_SECONDS = 0.5
"""How often the process table is read for stopped workers."""


def is_stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal (state T in /proc; False where there is no
    /proc to read, or the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


@dataclass
class Outcome:
    """How the gang ended: the pod's exit code and a one-line reason for the termination message."""

    code: int
    message: str
    failed_at: float | None = None
    """Wall time the first failure was seen (None on success)."""


def torchelastic_error_file(error_file: Path) -> Path:
    """Where a worker's torch `@record` writes its exception (TORCHELASTIC_ERROR_FILE), beside
    the file Phalanx's own library writes."""
    return error_file.with_name(error_file.name + ".json")


def failure_detail(error_file: Path) -> str:
    """Why a worker failed, in its own words: what Phalanx's library wrote, else the message of
    the exception torch's `@record` wrote as JSON (as torchrun reports it), else nothing."""
    with contextlib.suppress(OSError):
        return error_file.read_text().strip()
    try:
        recorded = json.loads(torchelastic_error_file(error_file).read_text())
        message = recorded["message"]
        return str(message["message"] if isinstance(message, dict) else message).strip()
    except (OSError, ValueError, KeyError, TypeError):
        return ""


@dataclass
class Worker:
    local_rank: int
    rank: int
    process: WorkerProcess
    error_file: Path


def _root_cause_first(worker: Worker) -> tuple[int, int]:
    """When several workers have failed, the likely cause first: a killed process, then an error
    of its own, and last a communication error (peers fail that way when one rank dies); among
    equals the lowest rank (rank 0 coordinates, e.g. the preflight barrier that names the missing
    ranks)."""
    code = worker.process.returncode
    assert code is not None
    if code < 0:
        return 0, worker.rank
    return (2 if code in (exits.COMMUNICATION, exits.CHECKPOINTED) else 1), worker.rank


@dataclass
class Supervisor:
    """One epoch's workers on this node."""

    launcher: Launcher
    workers: list[Worker] = field(default_factory=list)
    stop_grace_seconds: float = 10.0
    settle_seconds: float = 2.0
    stopped_seconds: float = STOPPED_SECONDS
    _stopped_since: dict[int, float] = field(default_factory=dict)
    _stopped_checked: float = 0.0
    oom_counters: tuple[Path, ...] = oom.COUNTERS
    _oom_kills: int | None = None
    """The pod's OOM kill count when the gang started (`phalanx.agent.oom`)."""

    def spawn(self, env: dict[str, str], local_rank: int, rank: int, error_file: Path) -> None:
        """Start a worker that writes why it fails to `error_file` (Phalanx's library) or the
        file beside it (torch's `@record`, as TORCHELASTIC_ERROR_FILE)."""
        if not self.workers:
            self._oom_kills = oom.oom_kills(self.oom_counters)
        error_file.unlink(missing_ok=True)
        recorded = torchelastic_error_file(error_file)
        recorded.unlink(missing_ok=True)
        env = {**env, PHALANX_WORKER_ERROR_FILE: str(error_file),
               TORCHELASTIC_ERROR_FILE: str(recorded)}  # fmt: skip
        self.workers.append(Worker(local_rank, rank, self.launcher.spawn(env), error_file))

    def signal_all(self, signum: int) -> None:
        for worker in self.workers:
            signal_worker(worker.process, signum)

    def poll(self) -> Outcome | None:
        """None while the gang trains; its outcome once all exited 0 or one failed (then the
        rest have been stopped)."""
        codes = [w.process.poll() for w in self.workers]
        if any(c not in (None, 0) for c in codes):
            failed_at = time.time()
            outcome = self._stop_after(self._root_cause())
            outcome.failed_at = failed_at
            return outcome
        if all(c == 0 for c in codes):
            return Outcome(exits.OK, f"all {len(self.workers)} workers exited 0")
        return self._frozen()

    def _frozen(self) -> Outcome | None:
        """A worker stopped for `stopped_seconds`: the gang is killed (a stopped process takes
        no SIGTERM until it runs again) and the failure is said to be a hang."""
        now = time.monotonic()
        if now - self._stopped_checked < STOPPED_CHECK_SECONDS:
            return None
        self._stopped_checked = now
        for worker in self.workers:
            if not is_stopped(worker.process.pid):
                self._stopped_since.pop(worker.rank, None)
                continue
            since = self._stopped_since.setdefault(worker.rank, now)
            if now - since >= self.stopped_seconds:
                stopped_at = time.time() - (now - since)
                self.kill()
                message = (
                    f"worker rank {worker.rank} stayed stopped (SIGSTOP) for "
                    f"{now - since:.0f} s: a frozen process"
                )
                return Outcome(exits.STOPPED, message, failed_at=stopped_at)
        return None

    def wait(self, tick: object = None) -> Outcome:
        """Until all workers exit 0, or one fails; `tick()` runs at each poll."""
        while (outcome := self.poll()) is None:
            if callable(tick):
                tick()
            time.sleep(POLL_SECONDS)
        return outcome

    def wait_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for worker in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=max(deadline - time.monotonic(), 0.01))
        self.kill()

    def kill(self) -> None:
        """SIGKILL every worker now and reap them: a new epoch replaces them, and what they hold
        is in the checkpoint already."""
        self.signal_all(signal.SIGKILL)
        for worker in self.workers:
            worker.process.wait()

    def _root_cause(self) -> Worker:
        """The failure to report. Collective failures cascade: when the first failure is one,
        the peers get `settle_seconds` to fail on their own before the choice is made."""
        failed = self._failed()
        if all(w.process.returncode in exits.INFRASTRUCTURE_CODES for w in failed):
            deadline = time.monotonic() + self.settle_seconds
            while time.monotonic() < deadline and any(
                w.process.poll() is None for w in self.workers
            ):
                time.sleep(POLL_SECONDS)
            failed = self._failed()
        return min(failed, key=_root_cause_first)

    def _failed(self) -> list[Worker]:
        return [w for w in self.workers if w.process.poll() not in (None, 0)]

    def _stop_after(self, first: Worker) -> Outcome:
        """One worker failed: stop the rest of the gang and classify the first failure."""
        self.signal_all(signal.SIGTERM)
        self.wait_all(self.stop_grace_seconds)
        code = first.process.returncode
        assert code is not None
        detail = failure_detail(first.error_file)
        if code == -signal.SIGKILL and oom.grew(self._oom_kills, self.oom_counters):
            message = (
                f"worker rank {first.rank} killed by the kernel's OOM killer (the pod's memory "
                "limit)"
            )
            return Outcome(exits.OOM_KILLED, message)
        if code < 0:  # killed by a signal
            name = signal.Signals(-code).name
            return Outcome(exits.SIGNAL_BASE - code, f"worker rank {first.rank} killed by {name}")
        if code in exits.INFRASTRUCTURE_CODES or exits.killed_by_signal(code):
            return Outcome(code, detail or f"worker rank {first.rank} exited {code}")
        return Outcome(exits.APPLICATION, detail or f"worker rank {first.rank} exited {code}")
