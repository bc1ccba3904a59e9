"""Run Phalanx's API service in-process on a free loopback port (uvicorn in a thread)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from kubernetes import client as k8s

from phalanx.server.app import create_app
from phalanx.server.settings import ServerSettings
from tests.support.controlplane import free_port, wait_until


@contextmanager
def running_api(api: k8s.ApiClient, **settings: object) -> Iterator[str]:
    """The service with `api` as its own identity; yields its base URL once /readyz is ok."""
    port = free_port()
    app = create_app(ServerSettings(port=port, **settings), api=api)  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="phalanx-api", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, 30, "the API service to be ready")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
