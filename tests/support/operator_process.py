"""The operator for a test: as a real process (`python -m phalanx.operator`), so a test can kill
it or scrape its own /metrics endpoint, or in a thread of the test's own process (its metrics
and settings at hand). The one way each is started and stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.controlplane import ControlPlane, wait_until
from phalanx.operator.main import run_in_thread
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.settings import OperatorSettings

READY_SECONDS = 30.0
"""How long an operator may take to be ready, and to stop."""


@contextmanager
def operator_thread(settings: OperatorSettings, metrics: OperatorMetrics) -> Iterator[None]:
    """An operator with `settings` in a thread of this process, ready before the block runs;
    stopped after it, which it must be within READY_SECONDS."""
    thread, stop, ready = run_in_thread(settings, metrics)
    try:
        wait_until(ready.is_set, READY_SECONDS, "the operator to be ready")
        yield
    finally:
        stop.set()
        thread.join(timeout=READY_SECONDS)
    assert not thread.is_alive(), "the operator did not stop"


@contextmanager
def operator_process(
    control_plane: ControlPlane,
    namespace: str,
    log: Path,
    metrics_port: int = 0,
    extra_env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """The operator watching `namespace`, its output appended to `log`; killed on exit.

    `metrics_port` 0 serves no /metrics; `extra_env`: more settings (PHALANX_OPERATOR_*)."""
    env = {
        **os.environ,
        "PHALANX_OPERATOR_NAMESPACES": json.dumps([namespace]),
        "PHALANX_OPERATOR_KUBECONFIG": str(control_plane.kubeconfig),
        "PHALANX_OPERATOR_METRICS_PORT": str(metrics_port),
        "PHALANX_OPERATOR_LIVENESS_ENDPOINT": "",
        "PHALANX_OPERATOR_RESYNC_SECONDS": "5",
        **(extra_env or {}),
    }
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.operator"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
