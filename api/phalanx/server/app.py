"""`create_app(settings)`: the FastAPI application. Kubernetes clients and the watch cache start
in its lifespan, so the OpenAPI document can be produced without a cluster (`phalanx openapi`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version

from fastapi import FastAPI
from kubernetes import client as k8s

from phalanx.control import Authorizer, JobControl, KubeJobs
from phalanx.kubeconfig import load_configuration
from phalanx.server import errors
from phalanx.server.cache import JobCache
from phalanx.server.metrics import ApiMetrics
from phalanx.server.routes import health, jobs, observe, web
from phalanx.server.settings import ServerSettings

log = logging.getLogger(__name__)
VERSION = version("phalanx")
"""The OpenAPI document's version: the package's, which the CLI, the chart and the images carry."""


def create_app(settings: ServerSettings, api: k8s.ApiClient | None = None) -> FastAPI:
    """The application; `api` (the service's own client) defaults to `settings.kubeconfig`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = api or k8s.ApiClient(load_configuration(settings.kubeconfig))
        if settings.insecure_local_credentials:
            log.warning(
                "INSECURE: --insecure-local-credentials is set. Callers are NOT authenticated and "
                "every request runs with this service's own Kubernetes rights. Local development "
                "only; never expose this service."
            )
        if not settings.tls and settings.insecure_http:
            log.warning(
                "INSECURE: serving plain HTTP on %s (--insecure-http). Callers' bearer tokens "
                "cross the network in the clear; use --tls-cert-file and --tls-key-file, or keep "
                "this behind a TLS-terminating proxy.",
                settings.host,
            )
        app.state.cache = JobCache(client)
        app.state.control = JobControl(
            source=app.state.cache,
            kube=KubeJobs(client),
            authorizer=Authorizer(
                client,
                settings.authn_cache_seconds,
                settings.authz_cache_seconds,
                settings.token_audiences,
            ),
            page_size_max=settings.page_size_max,
        )
        app.state.cache.start()
        try:
            yield
        finally:
            app.state.cache.stop()

    app = FastAPI(
        title="Phalanx",
        version=VERSION,
        summary="Fault-tolerant distributed PyTorch training on Kubernetes: job control.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = ApiMetrics()
    app.middleware("http")(app.state.metrics.middleware)
    errors.install(app)
    app.include_router(jobs.router)
    app.include_router(observe.router)
    app.include_router(health.router)
    web.mount(app)
    return app
