"""Liveness, readiness (the watch cache has listed once) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from phalanx.models.responses import Health
from phalanx.server.deps import CacheDep

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz", response_model=Health)
def healthz() -> Health:
    """The process serves requests."""
    return Health(status="ok")


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=Health,
    responses={503: {"description": "The job cache has not listed yet"}},
)
def readyz(cache: CacheDep) -> Health:
    """The job cache holds a full list: reads are answered from it."""
    if not cache.ready.is_set():
        raise HTTPException(503, "the job cache has not listed yet")
    return Health(status="ok")


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
)
def metrics(request: Request) -> Response:
    """Request counts and latencies, in the Prometheus text format."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
