"""The few Kubernetes API calls the agent makes (read, merge-patch and watch a Lease), over the
standard library's HTTPS with the pod's service-account token.

Why not the `kubernetes` client: the agent is injected into images that have only `python3`
(see `bundle`). The client would also cost the agent about a second of imports on every pod
start, for three calls. The token is read again for each request: a projected service-account
token is rotated by the kubelet while the pod runs.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_SECONDS = 10.0
"""A request that gets no answer in this long fails (a watch's read timeout is its own)."""


class KubeError(Exception):
    """The API server refused a request, or could not be reached."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status


@dataclass(frozen=True)
class KubeAPI:
    """Where the API server is and how to prove who we are."""

    server: str
    """https://host:port"""
    token: str | None = None
    token_file: Path | None = None
    ca_file: Path | None = None

    @classmethod
    def in_cluster(cls) -> KubeAPI:
        """The pod's own API server and service account (as client-go's in-cluster config)."""
        host, port = (
            os.environ.get("KUBERNETES_SERVICE_HOST"),
            os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
        )
        token = SERVICE_ACCOUNT / "token"
        if not host or not token.is_file():
            raise KubeError(None, "not in a pod with a service-account token mounted")
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        ca = SERVICE_ACCOUNT / "ca.crt"
        return cls(f"https://{host}:{port}", token_file=token, ca_file=ca if ca.is_file() else None)

    def _bearer(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        return self.token

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        url = urlsplit(self.server)
        if url.scheme != "https":
            return http.client.HTTPConnection(url.netloc, timeout=timeout)
        context = ssl.create_default_context(
            cafile=str(self.ca_file) if self.ca_file is not None else None
        )
        return http.client.HTTPSConnection(url.netloc, timeout=timeout, context=context)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        content_type: str,
        timeout: float,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        headers = {"Accept": "application/json"}
        if bearer := self._bearer():
            headers["Authorization"] = f"Bearer {bearer}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        connection = self._connection(timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            raise KubeError(None, f"{method} {path}: {error}") from error
        if response.status >= 300:
            text = response.read().decode(errors="replace")
            connection.close()
            with contextlib.suppress(ValueError, AttributeError):
                text = json.loads(text).get("message", text)
            raise KubeError(response.status, f"{method} {path}: {text}")
        return connection, response

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One request; the answer's JSON object."""
        connection, response = self._send(method, path, body, content_type, TIMEOUT_SECONDS)
        try:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
        finally:
            connection.close()

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def watch(
        self,
        path: str,
        params: dict[str, str],
        seconds: int,
        opened: Callable[[http.client.HTTPConnection], None] | None = None,
    ) -> Generator[dict[str, Any], None, None]:
        """The watch events of the collection at `path` (one JSON object a line) until the
        server ends the request after `seconds`; `opened` gets the connection, so another thread
        can end the watch sooner (`close_watch`)."""
        query = urlencode({**params, "watch": "1", "timeoutSeconds": str(seconds)})
        connection, response = self._send("GET", f"{path}?{query}", None, "", seconds + 30)
        if opened is not None:
            opened(connection)
        try:
            while line := response.readline():
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()


def lease_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return base if name is None else f"{base}/{name}"


def close_watch(connection: http.client.HTTPConnection) -> None:
    """End a watch from another thread: its reader sees the connection close."""
    if connection.sock is not None:
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_RDWR)
