"""The agent's supervisor finds a frozen worker in the process table, for any program.

Covers: a worker that stays stopped (SIGSTOP) past the limit fails the gang as a hang (the
agent's own exit code, read by the operator as Hang), the time it was first seen stopped kept as
the failure's moment; a worker stopped for less than the limit and continued does not; the
process table's state is what decides (real processes, no fakes).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from phalanx.agent.supervisor import Supervisor, is_stopped
from phalanx.agent.warm import Launcher
from phalanx.models import exits


def gang(tmp_path: Path, seconds: float, limit: float) -> Supervisor:
    supervisor = Supervisor(Launcher(["sleep", str(seconds)], warm=False), stopped_seconds=limit)
    for rank in range(2):
        supervisor.spawn(dict(os.environ), rank, rank, tmp_path / f"error-{rank}")
    return supervisor


def test_a_worker_that_stays_stopped_fails_the_gang_as_a_hang(tmp_path: Path) -> None:
    supervisor = gang(tmp_path, 60, limit=1.0)
    frozen = supervisor.workers[1].process.pid
    os.kill(frozen, signal.SIGSTOP)
    stopped_at = time.time()
    outcome = supervisor.wait()
    assert outcome.code == exits.STOPPED
    assert "worker rank 1 stayed stopped (SIGSTOP)" in outcome.message
    assert outcome.failed_at is not None
    assert abs(outcome.failed_at - stopped_at) < 1.0, "the failure began when it was stopped"
    assert all(w.process.poll() is not None for w in supervisor.workers), "the gang is gone"


def test_a_worker_stopped_briefly_and_continued_is_no_failure(tmp_path: Path) -> None:
    supervisor = gang(tmp_path, 2, limit=1.5)
    pid = supervisor.workers[0].process.pid
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while not is_stopped(pid):
        assert time.monotonic() < deadline, "the process table never showed it stopped"
        time.sleep(0.01)
    time.sleep(0.6)  # the fault itself: a stop shorter than the limit
    os.kill(pid, signal.SIGCONT)
    assert not is_stopped(pid)
    assert supervisor.wait().code == exits.OK
