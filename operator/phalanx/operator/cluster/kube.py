"""The one module that makes Kubernetes clients: the `kubernetes` ApiClient the executor uses
and the matching kopf login, both from the same credentials."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import kopf
from kubernetes import client as k8s

from phalanx.kubeconfig import load_configuration

__all__ = [
    "ApiClient",
    "Configuration",
    "KopfSessions",
    "ServedGroup",
    "TimedApiClient",
    "aiohttp_session",
    "api_client",
    "bearer_token",
    "connection_info",
    "has_api_group",
    "has_patterns",
    "kopf_session",
    "load_configuration",
    "watch_streams",
]


ApiClient = k8s.ApiClient
"""The kubernetes client's type, for the rooms that hold one without importing `kubernetes`."""
Configuration = k8s.Configuration
"""The kubernetes client's credentials, likewise."""


class TimedApiClient(k8s.ApiClient):
    """An ApiClient that counts, per thread, the seconds its requests took to be answered: the
    API server's time (and the loopback's), which a reconcile reports apart from its own."""

    def __init__(self, configuration: k8s.Configuration) -> None:
        super().__init__(configuration)
        self._spent = threading.local()

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return super().call_api(*args, **kwargs)
        finally:
            self._spent.seconds = self.spent() + time.perf_counter() - began

    def spent(self) -> float:
        """Seconds this thread's requests have waited for their answers, all told."""
        return float(getattr(self._spent, "seconds", 0.0))

    def count(self, seconds: float) -> None:
        """This thread waited `seconds` for requests that other threads sent for it."""
        self._spent.seconds = self.spent() + seconds


def api_client(configuration: k8s.Configuration, threads: int) -> TimedApiClient:
    """A client for the executor, used from `threads` worker threads at once. Its connection
    pool holds one connection per thread: with urllib3's default of 5 per core, the threads
    beyond it opened a connection (a TLS handshake, on both sides) for each request and threw it
    away after."""
    configuration.connection_pool_maxsize = max(threads, configuration.connection_pool_maxsize)
    return TimedApiClient(configuration)


KOPF_REQUEST_CONNECTIONS = 64
"""kopf's own requests in flight at once (its events, and the finalizer it takes off jobs that
an older operator put it on), beside its watch streams. Sized when every new job's loop waited
for kopf's finalizer patch (docs/figures.md, "Connections"); no loop waits on kopf now."""


def watch_streams(namespaces: list[str]) -> int:
    """Watch streams kopf keeps open: nodes, namespaces and CRDs cluster-wide, and TrainingJobs
    and Kueue Workloads per watched namespace (or once cluster-wide), with room for a stream
    being replaced while its successor opens. The pods and Leases are watched apart
    (`pod_watch`)."""
    return 2 * (3 + 2 * max(1, len(namespaces)))


def aiohttp_session(configuration: k8s.Configuration, limit: int) -> aiohttp.ClientSession:
    """An aiohttp session with `configuration`'s credentials (`connection_info`) and at most
    `limit` connections (0: no bound)."""
    info = connection_info(configuration)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(),
    )


def kopf_session(configuration: k8s.Configuration, namespaces: list[str]) -> kopf.AiohttpSession:
    """kopf's login: the same credentials (`connection_info`), in a session whose connections
    are bounded. kopf's own session has no bound: new jobs' finalizer patches (when its daemons
    needed them) at once opened a TLS connection each, kept open with a buffer each
    (docs/figures.md, "The operator's memory"). A stream a watch holds is a connection: the
    bound leaves room for every watch and `KOPF_REQUEST_CONNECTIONS` requests besides (a glob
    among `namespaces` may match more namespaces than it counts: then no bound)."""
    limit = 0 if has_patterns(namespaces) else watch_streams(namespaces) + KOPF_REQUEST_CONNECTIONS
    session = aiohttp_session(configuration, limit)
    return kopf.AiohttpSession(server=configuration.host, aiohttp_session=session)


def has_patterns(namespaces: list[str]) -> bool:
    """Whether any of the watched `namespaces` is a glob (kopf's namespace patterns)."""
    return any(c in name for name in namespaces for c in "*?[!")


class KopfSessions:
    """The sessions handed to kopf at each login, closed when the operator stops: kopf closes
    them as it stops too, but a TLS connection's socket is released only on a later turn of
    the loop, which kopf does not wait for (a test's loop then ended with the socket open)."""

    CLOSE_SECONDS = 0.25
    """aiohttp's advice for its TLS connections to finish closing."""

    def __init__(self, configuration: k8s.Configuration, namespaces: list[str]) -> None:
        self._configuration, self._namespaces = configuration, namespaces
        self._made: list[aiohttp.ClientSession] = []

    def login(self) -> kopf.AiohttpSession:
        context = kopf_session(self._configuration, self._namespaces)
        self._made = [s for s in self._made if not s.closed]  # kopf closed those it replaced
        self._made.append(context.aiohttp_session)
        return context

    async def close(self) -> None:
        for session in self._made:
            await session.close()
        if self._made:
            await asyncio.sleep(self.CLOSE_SECONDS)
        self._made.clear()


def connection_info(configuration: k8s.Configuration) -> kopf.ConnectionInfo:
    """The same credentials in kopf's form, for its watches.

    kopf asks again whenever the API server answers 401, so a rotated service-account token is
    read afresh here (the client's refresh hook re-reads the projected token file)."""
    refresh: Callable[[k8s.Configuration], None] | None = getattr(
        configuration, "refresh_api_key_hook", None
    )
    if refresh is not None:
        refresh(configuration)
    token = bearer_token(configuration)
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        scheme="Bearer" if token else None,
        token=token,
    )


def bearer_token(configuration: k8s.Configuration) -> str | None:
    """The bearer token of `configuration`, if it has one. The kubernetes client keeps it as
    api_key["BearerToken"] (kubeconfig tokens and in-cluster service accounts alike, with a
    lower-case "bearer " prefix in-cluster); older clients used api_key["authorization"]."""
    keys = configuration.api_key or {}
    value = keys.get("BearerToken") or keys.get("authorization") or ""
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() == "bearer":
        return token.strip() or None
    return value.strip() or None


def has_api_group(client: k8s.ApiClient, group: str, version: str | None = None) -> bool:
    """Whether the API server serves `group` (e.g. scheduling.x-k8s.io for PodGroups), and
    `version` of it where given (kueue.x-k8s.io/v1beta2: an older Kueue serves only v1beta1)."""
    groups = k8s.ApisApi(client).get_api_versions().groups or []
    return any(
        g.name == group and (version is None or any(v.version == version for v in g.versions or []))
        for g in groups
    )


class ServedGroup:
    """Whether the API server serves an API group: asked again, at most every `recheck_seconds`,
    while it does not, so that a component installed after the operator (Kueue, say) is found
    without restarting it; once served, it stays so (a CRD removed under running jobs is not a
    case to handle)."""

    def __init__(
        self, client: k8s.ApiClient, group: str, version: str | None = None,
        recheck_seconds: float = 10.0,
    ) -> None:  # fmt: skip
        self._client, self._group, self._version = client, group, version
        self.recheck_seconds = recheck_seconds
        self.served = False
        """The last answer."""
        self._asked_at: float | None = None

    def due(self) -> bool:
        """Whether `refresh` would ask the API server (not served, and not asked lately)."""
        if self.served:
            return False
        return self._asked_at is None or time.monotonic() - self._asked_at >= self.recheck_seconds

    def refresh(self, now: bool = False) -> bool:
        """Ask the API server if due, or `now` while not served (it blocks: call it off the
        event loop); the answer."""
        if self.due() or (now and not self.served):
            self._asked_at = time.monotonic()
            self.served = has_api_group(self._client, self._group, self._version)
        return self.served
