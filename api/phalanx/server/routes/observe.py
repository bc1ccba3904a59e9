"""Watching a job: its events, its pods' logs by node rank, its checkpoints, and a live progress
stream (server-sent events)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import StreamingResponse

from phalanx.server import views
from phalanx.server.auth import Action
from phalanx.server.deps import AuthorizerDep, CacheDep, CallerDep, KubeDep, allow, cached_job
from phalanx.server.routes.jobs import ONE_JOB
from phalanx.server.schemas import Checkpoints, EventList, HistoryPoint, JobEvent, JobHistory

router = APIRouter(prefix="/api/v1/namespaces/{namespace}/jobs/{name}", tags=["observe"])
STREAM_HEARTBEAT_SECONDS = 15.0


@router.get("/events", operation_id="listJobEvents", response_model=EventList, responses=ONE_JOB)
def list_job_events(
    namespace: str, name: str, kube: KubeDep, caller: CallerDep, authorizer: AuthorizerDep
) -> EventList:
    """The job's Kubernetes events (Started, Restart, Shrink, Grow, Hang...), oldest first."""
    allow(authorizer, caller, Action("list", namespace, resource="events", group=""))
    items = [
        JobEvent(
            time=e.last_timestamp or e.event_time or e.first_timestamp,
            type=e.type,
            reason=e.reason,
            message=e.message,
            count=e.count,
        )
        for e in kube.events(namespace, name)
    ]
    return EventList(items=sorted(items, key=lambda e: (e.time is None, e.time)))


@router.get(
    "/logs",
    operation_id="getJobLogs",
    response_class=StreamingResponse,
    responses={**ONE_JOB, 200: {"content": {"text/plain": {}}, "description": "Log text"}},
)
def get_job_logs(
    namespace: str,
    name: str,
    cache: CacheDep,
    kube: KubeDep,
    caller: CallerDep,
    authorizer: AuthorizerDep,
    node: Annotated[int, Query(ge=0, description="Node rank in the current epoch.")] = 0,
    follow: Annotated[bool, Query(description="Keep streaming new lines.")] = False,
    tail_lines: Annotated[int | None, Query(alias="tailLines", ge=1)] = None,
) -> StreamingResponse:
    """Logs of node rank `node` of the current epoch (pod `<job>-<epoch>-<node>`)."""
    try:
        pod = views.node_pod(cached_job(cache, namespace, name), node)
    except views.NoSuchRankError as error:
        raise HTTPException(404, str(error)) from error
    allow(authorizer, caller, Action("get", namespace, pod, "pods", "", "log"))
    return StreamingResponse(kube.logs(namespace, pod, tail_lines, follow), media_type="text/plain")


@router.get(
    "/checkpoints", operation_id="getJobCheckpoints", response_model=Checkpoints, responses=ONE_JOB
)
def get_job_checkpoints(
    namespace: str, name: str, cache: CacheDep, caller: CallerDep, authorizer: AuthorizerDep
) -> Checkpoints:
    """Where the job checkpoints, its retention and cadence, and the newest valid checkpoint."""
    allow(authorizer, caller, Action("get", namespace, name))
    job = views.detail(cached_job(cache, namespace, name))
    checkpoint = job.spec.checkpoint
    return Checkpoints(
        location=checkpoint.url or checkpoint.dir or "",
        last=job.status.last_checkpoint if job.status else None,
        keep=checkpoint.keep,
        interval_steps=checkpoint.interval_steps,
    )


@router.get("/history", operation_id="getJobHistory", response_model=JobHistory, responses=ONE_JOB)
def get_job_history(
    namespace: str, name: str, cache: CacheDep, caller: CallerDep, authorizer: AuthorizerDep
) -> JobHistory:
    """Epoch, world size, step, throughput and loss at each status change the service saw: the
    data behind the web page's timeline and charts."""
    allow(authorizer, caller, Action("get", namespace, name))
    cached_job(cache, namespace, name)
    return JobHistory(
        since=cache.history.since,
        points=[
            HistoryPoint.model_validate(p, from_attributes=True)
            for p in cache.history.points((namespace, name))
        ],
    )


def _progress_events(cache: CacheDep, namespace: str, name: str) -> Iterator[str]:
    """`progress` events when the job's status changes; a comment line to keep proxies open."""
    last: dict[str, Any] | None = None
    version = -1
    while True:
        job = cache.get(namespace, name)
        if job is None:
            yield "event: deleted\ndata: {}\n\n"
            return
        summary = views.summary(job).model_dump(mode="json", by_alias=True)
        if summary != last:
            last = summary
            yield f"event: progress\ndata: {json.dumps(summary)}\n\n"
            if summary["phase"] in ("Succeeded", "Failed"):
                return
        changed = cache.wait_for_change(version, STREAM_HEARTBEAT_SECONDS)
        if changed == version:
            yield ": keep-alive\n\n"
        version = changed


@router.get(
    "/progress",
    operation_id="streamJobProgress",
    response_class=StreamingResponse,
    responses={**ONE_JOB, 200: {"content": {"text/event-stream": {}}, "description": "SSE"}},
)
def stream_job_progress(
    namespace: str, name: str, cache: CacheDep, caller: CallerDep, authorizer: AuthorizerDep
) -> StreamingResponse:
    """Server-sent events: a `progress` event (the job's summary) on every change, until it
    ends."""
    allow(authorizer, caller, Action("watch", namespace, name))
    cached_job(cache, namespace, name)
    return StreamingResponse(
        _progress_events(cache, namespace, name), media_type="text/event-stream"
    )
