"""Job control's errors as HTTP answers: the REST edge's one mapping.

Each `JobControlError` carries the code the kube API gives its reason; the body is
`{"detail": ...}` (for 422, one entry per refused field), as FastAPI answers its own errors.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from phalanx.control.errors import JobControlError, UnauthenticatedError


def _answer(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, JobControlError)
    detail = error.detail
    body = {"detail": detail if isinstance(detail, str) else [p.model_dump() for p in detail]}
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, UnauthenticatedError) else None
    return JSONResponse(body, status_code=error.code, headers=headers)


def install(app: FastAPI) -> None:
    """Answer every JobControlError a route lets through with its HTTP status."""
    app.add_exception_handler(JobControlError, _answer)
