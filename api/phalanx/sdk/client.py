"""`Client` and `AsyncClient`: the same methods, sync and async, over httpx."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Self, TypeVar

import httpx

from phalanx.models.responses import EventList, JobDetail, JobList
from phalanx.sdk import calls
from phalanx.sdk.calls import Call, Condition, Manifest
from phalanx.sdk.errors import raise_for

T = TypeVar("T")
POLL_SECONDS = 1.0


Verify = ssl.SSLContext | bool
"""httpx's `verify`: True checks the service's certificate against the system's CAs (or
SSL_CERT_FILE); a context from `ssl.create_default_context(cafile=...)` against the service's own
CA (the chart's Secret has it as `ca.crt`)."""


def _options(base_url: str, token: str | None, timeout: float, verify: Verify) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return {
        "base_url": base_url.rstrip("/"),
        "headers": headers,
        "timeout": timeout,
        "verify": verify,
    }


class Client:
    """Job control over the REST API, with the caller's bearer token (RBAC decides)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        namespace: str = "default",
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        verify: Verify = True,
    ) -> None:
        self.namespace = namespace
        self._http = httpx.Client(**_options(base_url, token, timeout, verify), transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _do(self, call: Call[T]) -> T:
        response = self._http.request(call.method, call.path, params=call.params, json=call.json)
        raise_for(response)
        return call.read(response)

    def create(self, manifest: Manifest) -> JobDetail:
        """Create a job from a TrainingJob, a mapping, or a YAML file."""
        return self._do(calls.create(self.namespace, manifest))

    def get(self, name: str) -> JobDetail:
        return self._do(calls.get(self.namespace, name))

    def list(
        self, *, all_namespaces: bool = False, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100,
    ) -> Iterator[JobList]:  # fmt: skip
        """Pages of jobs, following `continue` until the last one."""
        token = None
        namespace = None if all_namespaces else self.namespace
        while True:
            page = self._do(calls.list_jobs(namespace, phase, label_selector, limit, token))
            yield page
            if not (token := page.continue_):
                return

    def scale(self, name: str, nodes: int) -> JobDetail:
        return self._do(calls.scale(self.namespace, name, nodes))

    def suspend(self, name: str) -> JobDetail:
        return self._do(calls.suspend(self.namespace, name))

    def resume(self, name: str) -> JobDetail:
        return self._do(calls.resume(self.namespace, name))

    def delete(self, name: str) -> None:
        self._do(calls.delete(self.namespace, name))

    def events(self, name: str) -> EventList:
        """The job's events (Started, Restart, Shrink, Grow, Hang...), oldest first."""
        return self._do(calls.events(self.namespace, name))

    def logs(
        self, name: str, node: int = 0, follow: bool = False, tail_lines: int | None = None
    ) -> Iterator[str]:
        """Log lines of node rank `node` of the current epoch."""
        params = calls.logs_params(node, follow, tail_lines)
        path = f"/api/v1/namespaces/{self.namespace}/jobs/{name}/logs"
        with self._http.stream("GET", path, params=params, timeout=None) as response:
            if not response.is_success:
                response.read()
                raise_for(response)
            yield from response.iter_lines()

    def wait_for(self, name: str, condition: Condition, timeout: float) -> JobDetail:
        """Until the job reaches `condition` (a phase such as "Succeeded", a condition type that
        is True, or a predicate); TimeoutError after `timeout` s, JobEndedError if it ended
        otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(name)
            if calls.reached(job, condition):
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {name} did not reach {condition} in {timeout} s")
            time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))


class AsyncClient:
    """The async twin of `Client`."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        namespace: str = "default",
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: Verify = True,
    ) -> None:
        self.namespace = namespace
        self._http = httpx.AsyncClient(
            **_options(base_url, token, timeout, verify), transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _do(self, call: Call[T]) -> T:
        response = await self._http.request(
            call.method, call.path, params=call.params, json=call.json
        )
        raise_for(response)
        return call.read(response)

    async def create(self, manifest: Manifest) -> JobDetail:
        return await self._do(calls.create(self.namespace, manifest))

    async def get(self, name: str) -> JobDetail:
        return await self._do(calls.get(self.namespace, name))

    async def list(
        self, *, all_namespaces: bool = False, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100,
    ) -> AsyncIterator[JobList]:  # fmt: skip
        token = None
        namespace = None if all_namespaces else self.namespace
        while True:
            page = await self._do(calls.list_jobs(namespace, phase, label_selector, limit, token))
            yield page
            if not (token := page.continue_):
                return

    async def scale(self, name: str, nodes: int) -> JobDetail:
        return await self._do(calls.scale(self.namespace, name, nodes))

    async def suspend(self, name: str) -> JobDetail:
        return await self._do(calls.suspend(self.namespace, name))

    async def resume(self, name: str) -> JobDetail:
        return await self._do(calls.resume(self.namespace, name))

    async def delete(self, name: str) -> None:
        await self._do(calls.delete(self.namespace, name))

    async def events(self, name: str) -> EventList:
        """The job's events (Started, Restart, Shrink, Grow, Hang...), oldest first."""
        return await self._do(calls.events(self.namespace, name))

    async def logs(
        self, name: str, node: int = 0, follow: bool = False, tail_lines: int | None = None
    ) -> AsyncIterator[str]:
        params = calls.logs_params(node, follow, tail_lines)
        path = f"/api/v1/namespaces/{self.namespace}/jobs/{name}/logs"
        async with self._http.stream("GET", path, params=params, timeout=None) as response:
            if not response.is_success:
                await response.aread()
                raise_for(response)
            async for line in response.aiter_lines():
                yield line

    async def wait_for(self, name: str, condition: Condition, timeout: float) -> JobDetail:
        deadline = time.monotonic() + timeout
        while True:
            job = await self.get(name)
            if calls.reached(job, condition):
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {name} did not reach {condition} in {timeout} s")
            await asyncio.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))
