"""Finding a worker by its rank in a process tree that no agent reports on (torchrun or the
script as the pod's command), with real processes: `--kill-rank` hits the worker, not the
launcher above it nor a helper the worker forked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from phalanx.local.processes import find_by_env, signal_tree

LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    worker = (
        "import subprocess, sys, time;"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        "time.sleep(60)"
    )
    for rank in ("0", "1"):
        subprocess.Popen([sys.executable, "-c", worker], env={**os.environ, "RANK": rank})
    print("started", flush=True)
    time.sleep(60)
    """
)


def test_the_worker_of_a_rank_is_found_below_its_launcher() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert launcher.stdout is not None
        assert launcher.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        found = None
        while found is None and time.monotonic() < deadline:
            found = find_by_env(launcher.pid, "RANK", "1")
            time.sleep(0.05)
        assert found is not None
        worker = psutil.Process(found)
        assert worker.environ()["RANK"] == "1"
        assert worker.ppid() == launcher.pid, "the worker, not the helper it forked"
        assert find_by_env(launcher.pid, "RANK", "7") is None
    finally:
        signal_tree(launcher.pid, signal.SIGKILL)
        launcher.wait()
        if launcher.stdout is not None:
            launcher.stdout.close()
