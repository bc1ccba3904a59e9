"""The local backend's tests run `phalanx` in subprocesses; none may leave a process behind."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a test does, it leaves no process of its runs behind (and says so if it did)."""
    yield
    left = [p for p in psutil.process_iter() if _in(tmp_path, p)]
    for process in left:
        process.send_signal(signal.SIGKILL)
    assert not left, f"processes left behind: {[p.pid for p in left]}"


def _in(tmp_path: Path, process: psutil.Process) -> bool:
    try:
        return str(tmp_path) in process.environ().get("PHALANX_TRAINER_LOG_DIR", "")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
