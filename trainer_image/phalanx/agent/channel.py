"""How an agent hears of new epochs and tells the operator what it does (in-place restarts).

Why a small protocol: the local backend passes both through files, a cluster through the job's
Lease; the agent's loop is the same either way. See `wire` for the messages.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from phalanx.agent.wire import Assignment, Report, WireError


class Assignments(Protocol):
    def current(self) -> Assignment | None:
        """The newest assignment published, without blocking (None before the first)."""
        ...


class Reports(Protocol):
    def publish(self, report: Report) -> None: ...


@dataclass
class FileAssignments:
    """Reads the assignment file whenever it changed (the writer replaces it atomically)."""

    path: Path
    _seen: tuple[int, int] | None = field(default=None, init=False)
    _last: Assignment | None = field(default=None, init=False)

    def current(self) -> Assignment | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self._last
        key = (stat.st_mtime_ns, stat.st_ino)
        if key != self._seen:
            with contextlib.suppress(OSError, WireError):
                self._last = Assignment.from_json(self.path.read_bytes())
                self._seen = key
        return self._last


@dataclass
class FileReports:
    """Writes the agent's report to a file, atomically (the local backend reads it)."""

    path: Path

    def publish(self, report: Report) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(report.to_json())
        tmp.replace(self.path)
