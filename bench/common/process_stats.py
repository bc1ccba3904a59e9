"""A benchmark's view of a process it runs: CPU seconds used and peak resident memory."""

from __future__ import annotations

from pathlib import Path

import psutil


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
