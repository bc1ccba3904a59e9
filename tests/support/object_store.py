"""A real S3-compatible object store for tests: versitygw, an S3 gateway over a POSIX folder,
built from its pinned Go module by tests/tools/cluster-tools.sh (cached after the first build),
served on loopback.

Why versitygw: a real S3 server (SigV4 authentication, multipart uploads, ListObjectsV2,
bucket creation), not a mock of one; one static binary built here in 88 s cold (the Go proxy
serves its module; no registry is reachable for an image); Apache-2.0. Its objects are plain
files under the folder, so a test can leave exactly what an interrupted upload leaves (shards
without `.metadata`) and see what a job wrote. The kind suite runs the same binary as a pod.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.controlplane import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY = "phalanx-test"
SECRET_KEY = "phalanx-test-secret"


def versitygw() -> Path:
    """The pinned versitygw binary, built once."""
    tools = subprocess.run(
        ["bash", str(ROOT / "tests/tools/cluster-tools.sh"), "versitygw"],
        capture_output=True, text=True, check=True, timeout=900,
    ).stdout.strip().splitlines()[-1]  # fmt: skip
    return Path(tools) / "versitygw"


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str
    folder: Path
    """Where its buckets are folders and its objects files."""

    def client_env(self) -> dict[str, str]:
        """What a program needs to reach it, the way the AWS SDKs (and s3fs) read it."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
        }


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def running_object_store(folder: Path) -> Iterator[ObjectStore]:
    """versitygw serving `folder` on a free loopback port until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = subprocess.Popen(
        [str(versitygw()), "--port", f"127.0.0.1:{port}", "posix", str(folder)],
        env={**os.environ, "ROOT_ACCESS_KEY": ACCESS_KEY, "ROOT_SECRET_KEY": SECRET_KEY},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: _answers(port) or server.poll() is not None, 30, "versitygw to listen")
        assert server.poll() is None, server.communicate()[1][-2000:]
        yield ObjectStore(f"http://127.0.0.1:{port}", folder)
    finally:
        server.terminate()
        server.communicate(timeout=30)  # reaps it and closes its stderr pipe
