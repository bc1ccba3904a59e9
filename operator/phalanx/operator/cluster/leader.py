"""Leader election on a coordination.k8s.io Lease, so that operator replicas stand by and one acts.

Why: one operator pod is a single point of failure whose replacement on a lost node waits out
the node's eviction (minutes), while a second replica that already runs takes over in about one
Lease duration. Two acting at once would reconcile every job twice (two epochs, duplicate pods),
so exactly one holds the Lease and only the holder runs kopf.

The rules are client-go's (`k8s.io/client-go/tools/leaderelection`): a candidate takes the Lease
when it is free, or when its record has not changed for `leaseDurationSeconds` as measured on the
candidate's own clock (no two machines' clocks are compared); the holder renews it every retry
period and gives up leadership when it could not renew within the renew deadline, which is
shorter than the duration, so it stops acting before anyone else may start. Every write carries
the Lease's resourceVersion: of two candidates, one wins. A holder that stops cleanly releases the
Lease (client-go's ReleaseOnCancel), so that a rollout or a drained node hands over at once.

Not the kubernetes client's `leaderelection` package: it blocks a thread with no way to stop it
or release the Lease, exits the process on a bad setting, and logs every retry at INFO.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElectionTimes:
    """How long a Lease holds, and how the holder keeps it (seconds)."""

    lease: float = 10.0
    """A holder unheard of this long is replaced: the takeover time after a crash."""
    renew_deadline: float = 7.0
    """The holder stops acting when it could not renew for this long (< `lease`)."""
    retry: float = 1.0
    """How often the holder renews and a candidate tries."""

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.lease:
            raise ValueError(
                f"leader election needs 0 < retry ({self.retry}) < renew deadline "
                f"({self.renew_deadline}) < lease duration ({self.lease})"
            )


@dataclass
class LeaderElector:
    """One candidate for the Lease `namespace/name`, as `identity` (the pod's name)."""

    api: k8s.CoordinationV1Api
    namespace: str
    name: str
    identity: str
    times: ElectionTimes = field(default_factory=ElectionTimes)
    owner: tuple[k8s.CoreV1Api, str] | None = None
    """A ServiceAccount in `namespace` that owns the Lease this candidate creates: deleting it
    (helm uninstall) deletes the Lease; while it is missing, no Lease is created."""
    _observed: tuple[Any, ...] | None = None
    _observed_at: float = 0.0
    _renewed: float | None = None

    def leading(self) -> bool:
        """Whether this replica may act now: it renewed the Lease within the renew deadline, on
        the monotonic clock. A process that was frozen (a stopped VM, a long pause) comes back
        past it and writes nothing before its renewal loop finds out who leads now."""
        renewed = self._renewed
        return renewed is not None and time.monotonic() - renewed < self.times.renew_deadline

    async def acquire(self, stopped: Callable[[], bool]) -> bool:
        """Wait until this candidate holds the Lease (True), or `stopped()` says so (False)."""
        waiting_for = None
        while not stopped():
            try:
                holder = await asyncio.to_thread(self._try)
            except Exception as error:  # an API server not up yet: a candidate waits, not dies
                log.warning("leader election: %s cannot reach the Lease: %s", self.identity, error)
                holder = None
            if holder == self.identity:
                self._renewed = time.monotonic()
                log.info(
                    "leader election: %s leads (Lease %s/%s)", holder, self.namespace, self.name
                )
                return True
            if holder != waiting_for:
                log.info("leader election: %s stands by; %s leads", self.identity, holder)
                waiting_for = holder
            await asyncio.sleep(self.times.retry)
        return False

    async def hold(self, stopped: Callable[[], bool]) -> bool:
        """Renew the Lease until `stopped()` (True) or a renewal failed for the renew deadline
        (False: leadership is lost, and whoever holds it acts from now on)."""
        while not stopped():
            await asyncio.sleep(self.times.retry)
            began = time.monotonic()
            try:
                held = await asyncio.to_thread(self._try) == self.identity
            except Exception as error:  # an API server away: retried until the deadline
                log.warning("leader election: renewing failed: %s", error)
                held = False
            if held:
                self._renewed = began  # valid from when the renewal was sent
            elif not self.leading():
                log.error("leader election: %s lost the Lease", self.identity)
                return False
        return True

    def release(self) -> None:
        """Give the Lease up now (a clean stop): the next candidate need not wait it out."""
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            spec = lease.spec
            if spec is None or spec.holder_identity != self.identity:
                return
            spec.holder_identity = None
            spec.lease_duration_seconds = 1
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            log.info("leader election: %s released the Lease", self.identity)
        except ApiException as error:  # it expires by itself
            log.warning("leader election: releasing failed: %s", error.reason)

    def _try(self) -> str | None:
        """One attempt to take or renew the Lease; who holds it afterwards, as far as known."""
        now = datetime.now(UTC)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        spec = lease.spec = lease.spec or k8s.V1LeaseSpec()
        record = (spec.holder_identity, spec.renew_time, spec.lease_duration_seconds)
        if record != self._observed:  # measured on this clock from when the record changed
            self._observed, self._observed_at = record, time.monotonic()
        holder = spec.holder_identity
        duration = spec.lease_duration_seconds or self.times.lease
        if holder and holder != self.identity and time.monotonic() - self._observed_at < duration:
            return str(holder)
        if holder != self.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = round(self.times.lease)
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as error:
            if error.status == 409:  # another candidate wrote first
                return None
            raise
        return self.identity

    def _create(self, now: datetime) -> str | None:
        owners = None
        if self.owner is not None:
            core, account = self.owner
            try:
                meta = core.read_namespaced_service_account(account, self.namespace).metadata
            except ApiException as error:
                if error.status != 404:
                    raise
                log.warning("leader election: no ServiceAccount %s to own the Lease", account)
                return None  # being uninstalled: a Lease made now would outlive it
            uid = str(meta.uid) if meta is not None else ""
            owners = [k8s.V1OwnerReference(api_version="v1", kind="ServiceAccount",
                                           name=account, uid=uid)]  # fmt: skip
        lease = k8s.V1Lease(
            metadata=k8s.V1ObjectMeta(
                name=self.name, namespace=self.namespace, owner_references=owners
            ),
            spec=k8s.V1LeaseSpec(
                holder_identity=self.identity, lease_duration_seconds=round(self.times.lease),
                acquire_time=now, renew_time=now, lease_transitions=0,
            ),
        )  # fmt: skip
        try:
            self.api.create_namespaced_lease(self.namespace, lease)
        except ApiException as error:
            if error.status == 409:
                return None
            raise
        return self.identity


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace() -> str:
    """The namespace this pod runs in (POD_NAMESPACE, else its service account's), else
    `default` (out of a cluster)."""
    if namespace := os.environ.get("POD_NAMESPACE"):
        return namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def elector(
    client: k8s.ApiClient,
    namespace: str,
    name: str,
    identity: str,
    times: ElectionTimes,
    owner: str | None,
) -> LeaderElector:
    """A candidate for the Lease `namespace/name` with `client`; `owner`: the ServiceAccount
    that owns the Lease it creates (`LeaderElector.owner`)."""
    owned = (k8s.CoreV1Api(client), owner) if owner else None
    coordination = k8s.CoordinationV1Api(client)
    return LeaderElector(coordination, namespace, name, identity, times, owned)


@contextlib.asynccontextmanager
async def standby_health(endpoint: str | None) -> AsyncIterator[None]:
    """While a replica stands by, its liveness endpoint answers: it is healthy, only not acting
    (kopf serves the endpoint once it runs)."""
    if not endpoint:
        yield
        return
    url = urllib.parse.urlsplit(endpoint)

    async def healthy(_: web.Request) -> web.Response:
        return web.json_response({"standby": True})

    app = web.Application()
    app.router.add_get(url.path or "/", healthy)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, url.hostname, url.port).start()
    try:
        yield
    finally:
        await runner.cleanup()
