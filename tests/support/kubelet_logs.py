"""The one kubelet endpoint a log request reaches: `GET /containerLogs/{ns}/{pod}/{container}`.

The real API server serves `pods/log` by calling the kubelet of the pod's node over HTTPS, at
the node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`. This server stands in
for that kubelet (the test plays kubelet, as everywhere in these tests), so log reads go through
the real API server, its RBAC and its streaming proxy. Nothing of ours is mocked.
"""

from __future__ import annotations

import functools
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from kubernetes import client as k8s

from harness.pki import Pki

FOLLOW_SECONDS = 60.0
"""A follow stream ends after this long even if the test forgot to `finish` the pod."""


class KubeletLogs:
    """Log lines by pod; `append` feeds open follow streams, `finish` ends them."""

    def __init__(self) -> None:
        self._lines: dict[str, list[str]] = {}
        self._finished: set[str] = set()
        self._changed = threading.Condition()
        self.requests: list[str] = []
        """Every request path with its query, as the API server sent it."""

    def append(self, pod: str, *lines: str) -> None:
        with self._changed:
            self._lines.setdefault(pod, []).extend(lines)
            self._changed.notify_all()

    def finish(self, pod: str) -> None:
        """The container exited: follow streams of `pod` end after its last line."""
        with self._changed:
            self._finished.add(pod)
            self._changed.notify_all()

    def finish_all(self) -> None:
        with self._changed:
            self._finished.update(self._lines)
            self._changed.notify_all()

    def _more_or_finished(self, pod: str, sent: int) -> bool:
        return len(self._lines.get(pod, [])) > sent or pod in self._finished

    def stream(self, pod: str, tail: int | None, follow: bool) -> Iterator[str]:
        with self._changed:
            lines = list(self._lines.get(pod, []))
        sent = len(lines)
        yield from lines[-tail:] if tail is not None else lines
        while follow:
            with self._changed:
                self._changed.wait_for(
                    functools.partial(self._more_or_finished, pod, sent), timeout=FOLLOW_SECONDS
                )
                new = self._lines.get(pod, [])[sent:]
                done = pod in self._finished or not new
            sent += len(new)
            yield from new
            if done:
                return


def _handler(logs: KubeletLogs) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            logs.requests.append(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) != 4 or parts[0] != "containerLogs":
                self.send_error(404)
                return
            query = parse_qs(url.query)
            tail = int(query["tailLines"][0]) if "tailLines" in query else None
            follow = query.get("follow", ["false"])[0] == "true"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for line in logs.stream(parts[2], tail, follow):
                self.wfile.write(f"{line}\n".encode())
                self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: requests are kept in `logs.requests`."""

    return Handler


@contextmanager
def serving_logs(core: k8s.CoreV1Api, pki: Pki, nodes: list[str]) -> Iterator[KubeletLogs]:
    """A kubelet log endpoint on loopback, announced in the status of each of `nodes`."""
    logs = KubeletLogs()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(logs))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="kubelet-logs", daemon=True)
    thread.start()
    port = server.server_address[1]
    for node in nodes:
        core.patch_node_status(node, {"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        }})  # fmt: skip
    try:
        yield logs
    finally:
        logs.finish_all()
        server.shutdown()
        server.server_close()
