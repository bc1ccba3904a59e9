"""The API service's own metrics: requests by route and status, and their latency.

Bounded labels: the route template (`/api/v1/namespaces/{namespace}/jobs/{name}`), never the
concrete path, so job names do not become label values."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "phalanx_api_requests", "HTTP requests served, by route and status code",
            ["method", "route", "code"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "phalanx_api_request_duration_seconds", "Time to the response's first byte",
            ["method", "route"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )  # fmt: skip

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        self.latency.labels(request.method, route).observe(time.perf_counter() - started)
        self.requests.labels(request.method, route, str(response.status_code)).inc()
        return response
