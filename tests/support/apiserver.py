"""Run Phalanx's API service in-process on a free loopback port (uvicorn in a thread)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from kubernetes import client as k8s

from harness.controlplane import free_port, wait_until
from phalanx.server.app import create_app
from phalanx.server.settings import ServerSettings


@contextmanager
def running_api(api: k8s.ApiClient, ca: Path | None = None, **settings: object) -> Iterator[str]:
    """The service with `api` as its own identity; yields its base URL once /readyz is ok. With
    `tls_cert_file` and `tls_key_file` among the settings it serves HTTPS, and `ca` is what its
    certificate is checked against while waiting for it, as `phalanx-api` would serve them."""
    port = free_port()
    config = ServerSettings(port=port, **settings)  # type: ignore[arg-type]
    app = create_app(config, api=api)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            ssl_certfile=config.tls_cert_file,
            ssl_keyfile=config.tls_key_file,
        )
    )
    thread = threading.Thread(target=server.run, name="phalanx-api", daemon=True)
    thread.start()
    url = f"{'https' if config.tls else 'http'}://127.0.0.1:{port}"
    verify = ssl.create_default_context(cafile=str(ca)) if ca is not None else True

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=2, verify=verify).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, 30, "the API service to be ready")
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
