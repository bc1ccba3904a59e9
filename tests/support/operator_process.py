"""The operator as a real process (`python -m phalanx.operator`), so a test can kill it or scrape
its own /metrics endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.controlplane import ControlPlane


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
