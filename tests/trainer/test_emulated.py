"""The reference trainer's emulated compute (`--step-delay-seconds`) advances only while its
process runs: a process held (SIGSTOP, as a CPU quota or a throttled node holds it) does its
work that much later, so a slow node shows as a straggler; a plain sleep would not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

WORK = 0.6
HELD = 0.8
PROGRAM = (
    "import sys, time\n"
    "from phalanx.trainer import emulated\n"
    "start = time.monotonic()\n"
    "print('ready', flush=True)\n"
    f"emulated.work({WORK})\n"
    "print(time.monotonic() - start, flush=True)\n"
)


def run_work(hold: bool) -> float:
    """Wall seconds the child took for WORK seconds of work, held for HELD seconds if `hold`."""
    child = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    if hold:
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(HELD)  # the hold itself (a throttled node's stopped time), not a wait
        os.kill(child.pid, signal.SIGCONT)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0
    return float(out.strip())


def test_work_held_by_sigstop_is_not_done_while_held() -> None:
    assert run_work(hold=False) >= WORK
    took = run_work(hold=True)
    # The child's clock started before it said it was ready, so the hold falls inside what it
    # measures: all of the work plus the hold, less the slice under way when the hold began.
    assert took >= WORK + HELD - 0.05, f"{took:.2f} s: the held time counted as work"
