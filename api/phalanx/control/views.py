"""From stored TrainingJobs to job control's answers: summaries, details, filters and pages.

Pure: no client, no HTTP. Bad parameters are job control's BadRequestError, a missing node rank
its NotFoundError, so each edge reports them as it reports the kube API's own refusals."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from phalanx.control.errors import BadRequestError, NotFoundError
from phalanx.models.job import TrainingJob
from phalanx.models.names import node_pod_name
from phalanx.models.responses import Checkpoints, JobDetail, JobList, JobSummary

Job = Mapping[str, Any]
"""A TrainingJob as the API server stores it."""


def node_pod(job: Job, node: int) -> str:
    """The pod of node rank `node` in the job's current epoch (`<job>-<epoch>-<node>`, as the
    operator names it); NotFoundError if the epoch has no such rank."""
    name, status = job["metadata"]["name"], job.get("status") or {}
    epoch = status.get("epoch", 0)
    if epoch == 0 or node >= max(status.get("nodes", 0), 1):
        raise NotFoundError(f"job {name} has no node rank {node} in epoch {epoch}")
    return node_pod_name(name, epoch, node)


def _created(meta: Mapping[str, Any]) -> datetime | None:
    value = meta.get("creationTimestamp")
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def summary(job: Job) -> JobSummary:
    meta, status = job["metadata"], job.get("status") or {}
    return JobSummary(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        phase=status.get("phase"),
        nodes=status.get("nodes", 0),
        world_size=status.get("worldSize", 0),
        spares=status.get("spares", 0),
        epoch=status.get("epoch", 0),
        step=(status.get("progress") or {}).get("step"),
        restarts=(status.get("restarts") or {}).get("total", 0),
        goodput=status.get("goodput"),
        eta=(status.get("progress") or {}).get("eta"),
        created=_created(meta),
        labels=meta.get("labels") or {},
    )


def detail(job: Job) -> JobDetail:
    meta = job["metadata"]
    return JobDetail.model_validate(
        {
            "namespace": meta.get("namespace", ""),
            "name": meta["name"],
            "uid": meta.get("uid"),
            "created": _created(meta),
            "labels": meta.get("labels") or {},
            "spec": job["spec"],
            "status": job.get("status"),
        }
    )


def checkpoints(job: TrainingJob | JobDetail) -> Checkpoints:
    """Where the job checkpoints and its retention (the spec), the newest committed checkpoint
    and the cadence the program really keeps (as it reported them), beside the cadence the spec
    asks for: a program that does not read spec.checkpoint keeps its own."""
    checkpoint, status = job.spec.checkpoint, job.status
    observed = status.checkpoint_interval_steps if status else None
    last = status.last_checkpoint if status else None
    note = None
    if observed is None:
        note = (
            "one checkpoint reported so far: the cadence shows after the next"
            if last is not None
            else "no checkpoint reported: the program does not report its checkpoints "
            "(phalanx.resume and phalanx.progress.checkpoint do), or has not saved yet"
        )
    return Checkpoints(
        location=checkpoint.url or checkpoint.dir or "",
        last=last,
        keep=checkpoint.keep,
        interval_steps=observed,
        requested_interval_steps=checkpoint.interval_steps,
        note=note,
    )


def parse_selector(text: str | None) -> list[tuple[str, str, str | None]]:
    """`a=b,c!=d,e,!f` -> [(key, op, value)]: equality, inequality, exists, not exists."""
    terms: list[tuple[str, str, str | None]] = []
    for raw in filter(None, (t.strip() for t in (text or "").split(","))):
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in raw:
            key, value = raw.split("==", 1) if "==" in raw else raw.split("=", 1)
            terms.append((key.strip(), "=", value.strip()))
        elif raw.startswith("!"):
            terms.append((raw[1:].strip(), "!", None))
        else:
            terms.append((raw, "exists", None))
        if not terms[-1][0] or " " in terms[-1][0]:
            raise BadRequestError(
                f"labelSelector term {raw!r} is not key=value, key!=value, key or !key"
            )
    return terms


def matches(job: Job, phase: str | None, selector: list[tuple[str, str, str | None]]) -> bool:
    if phase is not None and (job.get("status") or {}).get("phase") != phase:
        return False
    labels = job["metadata"].get("labels") or {}
    for key, op, value in selector:
        ok = {
            "=": labels.get(key) == value,
            "!=": labels.get(key) != value,
            "exists": key in labels,
            "!": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _token(job: Job) -> str:
    key = f"{job['metadata'].get('namespace', '')}/{job['metadata']['name']}"
    return base64.urlsafe_b64encode(key.encode()).decode()


def after_token(token: str) -> tuple[str, str]:
    """The (namespace, name) a continue token points after; BadRequestError if it is not one."""
    try:
        namespace, _, name = base64.urlsafe_b64decode(token.encode()).decode().partition("/")
    except (binascii.Error, UnicodeDecodeError) as error:
        raise BadRequestError("continue is not a token this API returned") from error
    if not name:
        raise BadRequestError("continue is not a token this API returned")
    return namespace, name


def page(jobs: Sequence[Job], limit: int, continue_token: str | None) -> JobList:
    """`limit` jobs after the continue token (jobs are in namespace/name order)."""
    start = 0
    if continue_token:
        after = after_token(continue_token)
        start = next(
            (
                i
                for i, j in enumerate(jobs)
                if (j["metadata"].get("namespace", ""), j["metadata"]["name"]) > after
            ),
            len(jobs),
        )
    chunk = jobs[start : start + limit]
    rest = len(jobs) - start - len(chunk)
    return JobList(
        items=[summary(j) for j in chunk],
        continue_=_token(chunk[-1]) if rest > 0 and chunk else None,
        remaining=rest,
    )
