"""Run the operator: `phalanx-operator` or `python -m phalanx.operator` (flags: --help)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf
from prometheus_client import start_http_server

from phalanx.operator import kube
from phalanx.operator.builder.children import PODGROUP_GROUP
from phalanx.operator.execute import Executor
from phalanx.operator.handlers import Reconciler, register
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.settings import OperatorSettings

log = logging.getLogger("phalanx.operator")


async def serve(
    settings: OperatorSettings,
    metrics: OperatorMetrics | None = None,
    stop_flag: Any = None,
    ready_flag: Any = None,
) -> None:
    """Run the operator until `stop_flag` is set (or forever)."""
    metrics = metrics or OperatorMetrics()
    configuration = kube.load_configuration(settings.kubeconfig)
    client = kube.api_client(configuration)
    executor = Executor(client, settings.build_settings(), metrics)
    podgroups = await asyncio.to_thread(kube.has_api_group, client, PODGROUP_GROUP)
    reconciler = Reconciler(
        executor, metrics, settings.planner_config(), settings.resync_seconds, podgroups,
        settings.api_workers,
    )  # fmt: skip
    registry = kopf.OperatorRegistry()
    register(registry, reconciler, lambda: kube.connection_info(configuration))
    try:
        await kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            liveness_endpoint=settings.liveness_endpoint or None,
            stop_flag=stop_flag,
            ready_flag=ready_flag,
        )
    finally:
        reconciler.close()
        client.close()  # type: ignore[no-untyped-call]


def main() -> None:
    """Console entry point: settings from PHALANX_OPERATOR_* env and flags."""
    settings = OperatorSettings(_cli_parse_args=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    metrics = OperatorMetrics()
    if settings.metrics_port:
        start_http_server(settings.metrics_port, registry=metrics.registry)
        log.info("metrics on :%d/metrics", settings.metrics_port)
    asyncio.run(serve(settings, metrics))


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
