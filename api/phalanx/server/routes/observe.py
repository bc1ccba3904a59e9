"""Watching a job over HTTP: its events, its pods' logs by node rank, its checkpoints, its
history, and a live progress stream (server-sent events). Edges over `phalanx.control`; the
history and the stream's keep-alives are the service's own (its watch cache keeps them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from phalanx.control import views
from phalanx.models.responses import (
    Checkpoints,
    EventList,
    HistoryPoint,
    JobHistory,
    JobSummary,
)
from phalanx.models.status import ENDED
from phalanx.server.cache import JobCache
from phalanx.server.deps import CacheDep, CallerDep, ControlDep
from phalanx.server.routes.jobs import ONE_JOB

router = APIRouter(prefix="/api/v1/namespaces/{namespace}/jobs/{name}", tags=["observe"])
STREAM_HEARTBEAT_SECONDS = 15.0
KEEP_ALIVE = ": keep-alive\n\n"


@router.get("/events", operation_id="listJobEvents", response_model=EventList, responses=ONE_JOB)
def list_job_events(namespace: str, name: str, control: ControlDep, caller: CallerDep) -> EventList:
    """The job's Kubernetes events (Started, Restart, Shrink, Grow, Hang...), oldest first."""
    return control.events(caller, namespace, name)


@router.get(
    "/logs",
    operation_id="getJobLogs",
    response_class=StreamingResponse,
    responses={**ONE_JOB, 200: {"content": {"text/plain": {}}, "description": "Log text"}},
)
def get_job_logs(
    namespace: str,
    name: str,
    control: ControlDep,
    caller: CallerDep,
    node: Annotated[int, Query(ge=0, description="Node rank in the current epoch.")] = 0,
    follow: Annotated[bool, Query(description="Keep streaming new lines.")] = False,
    tail_lines: Annotated[int | None, Query(alias="tailLines", ge=1)] = None,
) -> StreamingResponse:
    """Logs of node rank `node` of the current epoch (pod `<job>-<epoch>-<node>`)."""
    chunks = control.logs(caller, namespace, name, node, tail_lines, follow)
    return StreamingResponse(chunks, media_type="text/plain")


@router.get(
    "/checkpoints", operation_id="getJobCheckpoints", response_model=Checkpoints, responses=ONE_JOB
)
def get_job_checkpoints(
    namespace: str, name: str, control: ControlDep, caller: CallerDep
) -> Checkpoints:
    """Where the job checkpoints, its retention and cadence, and the newest valid checkpoint."""
    return control.checkpoints(caller, namespace, name)


@router.get("/history", operation_id="getJobHistory", response_model=JobHistory, responses=ONE_JOB)
def get_job_history(
    namespace: str, name: str, cache: CacheDep, control: ControlDep, caller: CallerDep
) -> JobHistory:
    """Epoch, world size, step, throughput and loss at each status change the service saw: the
    data behind the web page's timeline and charts."""
    control.get(caller, namespace, name)
    return JobHistory(
        since=cache.history.since,
        points=[
            HistoryPoint.model_validate(p, from_attributes=True)
            for p in cache.history.points((namespace, name))
        ],
    )


def _progress_events(cache: JobCache, namespace: str, name: str) -> Iterator[str]:
    """`progress` events when the job's summary changes, until it ends; a comment line to keep
    proxies open when nothing changed for STREAM_HEARTBEAT_SECONDS. (The CLI's kubeconfig mode
    follows a kube watch instead, through `phalanx.control.progress`: the same summaries, no
    keep-alives to send.)"""
    last: JobSummary | None = None
    version = -1
    while True:
        job = cache.get(namespace, name)
        if job is None:
            yield "event: deleted\ndata: {}\n\n"
            return
        summary = views.summary(job)
        if summary != last:
            last = summary
            yield f"event: progress\ndata: {summary.model_dump_json(by_alias=True)}\n\n"
            if summary.phase in ENDED:
                return
        changed = cache.wait_for_change(version, STREAM_HEARTBEAT_SECONDS)
        if changed == version:
            yield KEEP_ALIVE
        version = changed


@router.get(
    "/progress",
    operation_id="streamJobProgress",
    response_class=StreamingResponse,
    responses={**ONE_JOB, 200: {"content": {"text/event-stream": {}}, "description": "SSE"}},
)
def stream_job_progress(
    namespace: str, name: str, cache: CacheDep, control: ControlDep, caller: CallerDep
) -> StreamingResponse:
    """Server-sent events: a `progress` event (the job's summary) on every change, until it
    ends."""
    control.watchable(caller, namespace, name)
    return StreamingResponse(
        _progress_events(cache, namespace, name), media_type="text/event-stream"
    )
