"""Errors the SDK raises: the API's status code as a type, its `detail` as the message."""

from __future__ import annotations

from typing import Any

import httpx


class PhalanxAPIError(Exception):
    """The API answered with an error."""

    def __init__(self, status: int, detail: Any) -> None:
        self.status, self.detail = status, detail
        if isinstance(detail, list):
            text = "; ".join(f"{d.get('field')}: {d.get('message')}" for d in detail)
        else:
            text = str(detail)
        super().__init__(f"{status}: {text}")


class UnauthorizedError(PhalanxAPIError):
    """401: no token, or the API server did not accept it."""


class ForbiddenError(PhalanxAPIError):
    """403: RBAC does not allow this caller the action."""


class NotFoundError(PhalanxAPIError):
    """404: no such job."""


class InvalidError(PhalanxAPIError):
    """422: the manifest or request is invalid; `detail` names each field."""


class JobEndedError(Exception):
    """`wait_for` saw the job end in a phase other than the one awaited."""


_BY_STATUS = {401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError, 422: InvalidError}


def error_for(status: int, detail: Any) -> PhalanxAPIError:
    """The SDK's error for an answer with this status and `detail`."""
    return _BY_STATUS.get(status, PhalanxAPIError)(status, detail)


def raise_for(response: httpx.Response) -> None:
    """Raise the matching error for a non-2xx response."""
    if response.is_success:
        return
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    raise error_for(response.status_code, detail)
