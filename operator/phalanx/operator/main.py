"""Run the operator: `phalanx-operator` or `python -m phalanx.operator` (flags: --help)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import kopf
from prometheus_client import start_http_server

from phalanx.operator import allocator, slow_start
from phalanx.operator.builder.children import PODGROUP_GROUP
from phalanx.operator.builder.workload import KUEUE_GROUP, KUEUE_VERSION
from phalanx.operator.cluster import kube
from phalanx.operator.cluster.leader import LeaderElector, elector, own_namespace, standby_health
from phalanx.operator.cluster.pod_watch import LeaseWatch, PodWatch
from phalanx.operator.execute import Executor
from phalanx.operator.handlers import Reconciler, register
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.settings import OperatorSettings

log = logging.getLogger("phalanx.operator")
STOP_POLL_SECONDS = 0.2


async def serve(
    settings: OperatorSettings,
    metrics: OperatorMetrics | None = None,
    stop_flag: Any = None,
    ready_flag: Any = None,
) -> bool:
    """Run the operator until `stop_flag` (a threading.Event) is set, or forever. With leader
    election, only while this replica holds the leader Lease: False when it lost it."""
    metrics = metrics or OperatorMetrics()
    configuration = kube.load_configuration(settings.kubeconfig)
    client = kube.api_client(configuration, settings.api_workers + slow_start.MAX_IN_FLIGHT)

    def stopped() -> bool:
        return stop_flag is not None and stop_flag.is_set()

    candidate = None
    if settings.leader_election:
        candidate = elector(
            client, settings.leader_namespace or own_namespace(), settings.leader_lease,
            settings.leader_identity or socket.gethostname(), settings.election_times(),
            settings.leader_owner,
        )  # fmt: skip
        async with standby_health(settings.liveness_endpoint):
            if not await candidate.acquire(stopped):
                client.close()  # type: ignore[no-untyped-call]
                return True
    metrics.leader.set(1)
    # kopf stops when its task is cancelled: by the stop flag or a lost Lease (`_hold`). Not a
    # kopf stop flag: after a SIGTERM, kopf waits 5 s for the waiter of a flag nobody sets.
    may_act = candidate.leading if candidate is not None else (lambda: True)
    operate = asyncio.create_task(
        _operate(settings, metrics, client, configuration, ready_flag, may_act)
    )
    held = asyncio.create_task(_hold(candidate, lambda: stopped() or operate.done()))
    held.add_done_callback(lambda _: operate.cancel())
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await operate
    finally:
        kept = await held
        metrics.leader.set(0)
        if candidate is not None and kept:
            await asyncio.to_thread(candidate.release)
        client.close()  # type: ignore[no-untyped-call]
    return kept


async def _operate(
    settings: OperatorSettings, metrics: OperatorMetrics, client: kube.ApiClient,
    configuration: kube.Configuration, ready_flag: Any, may_act: Callable[[], bool],
) -> None:  # fmt: skip
    executor = Executor(client, settings.build_settings(), metrics)
    podgroups = kube.ServedGroup(client, PODGROUP_GROUP)
    workloads = kube.ServedGroup(client, KUEUE_GROUP, KUEUE_VERSION)
    for group in (podgroups, workloads):
        await asyncio.to_thread(group.refresh)
    reconciler = Reconciler(
        executor, metrics, settings.planner_config(), settings.resync_seconds, podgroups,
        settings.api_workers, may_act, settings.unhealthy_labels(), workloads,
    )  # fmt: skip
    registry = kopf.OperatorRegistry()
    sessions = kube.KopfSessions(configuration, settings.namespaces)
    pods = PodWatch(configuration, settings.namespaces, reconciler.pod_changed, reconciler.wake_all)
    leases = LeaseWatch(configuration, settings.namespaces, reconciler.poke, reconciler.wake_all)
    loops = register(registry, reconciler, sessions.login, pods, leases)
    watching = asyncio.gather(pods.run(), leases.run())
    try:
        await kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            liveness_endpoint=settings.liveness_endpoint or None,
            ready_flag=ready_flag,
        )
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        await loops.close()
        reconciler.close()
        await sessions.close()


async def _hold(elector: LeaderElector | None, done: Callable[[], bool]) -> bool:
    """Until `done()` (True) or, with an elector, the Lease is lost (False)."""
    if elector is not None:
        return await elector.hold(done)
    while not done():
        await asyncio.sleep(STOP_POLL_SECONDS)
    return True


def main() -> None:
    """Console entry point: settings from PHALANX_OPERATOR_* env and flags."""
    settings = OperatorSettings(_cli_parse_args=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    allocator.cap_arenas(settings.malloc_arenas)  # before any thread starts
    allocator.fix_mmap_threshold(settings.malloc_mmap_threshold)
    metrics = OperatorMetrics()
    if settings.metrics_port:
        start_http_server(settings.metrics_port, registry=metrics.registry)
        log.info("metrics on :%d/metrics", settings.metrics_port)
    if not asyncio.run(serve(settings, metrics)):
        # Another replica acts now: a fresh start stands by behind it (client-go's controllers
        # exit likewise).
        sys.exit("phalanx-operator: lost the leader Lease; exiting to stand by again")


def run_in_thread(
    settings: OperatorSettings, metrics: OperatorMetrics
) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Start an operator in a background thread (for tests and the local backend).

    Returns the thread, its stop flag and its ready flag.
    """
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(serve(settings, metrics, stop, ready)),
        name="phalanx-operator",
        daemon=True,
    )
    thread.start()
    return thread, stop, ready
