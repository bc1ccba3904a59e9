"""What job control refuses, as plain errors: no HTTP in them.

Why these: they are the kube API's own reasons for refusing a request (`metav1.Status.reason`),
so an answer reads the same whether the service relayed it or the CLI met it with the user's
kubeconfig. Each edge maps them once: the REST service to HTTP responses
(`phalanx.server.errors`), the CLI's kubeconfig mode to the SDK's errors (`phalanx.cli.kubedirect`).
`code` is the code the kube API gives the reason, which both edges keep.
"""

from __future__ import annotations

from typing import ClassVar

from phalanx.models.responses import FieldProblem


class JobControlError(Exception):
    """A request job control refused; the message says why, in the API server's words."""

    code: ClassVar[int] = 500

    def __init__(self, detail: str | list[FieldProblem]) -> None:
        self.detail = detail
        text = (
            "; ".join(f"{p.field}: {p.message}" for p in detail)
            if isinstance(detail, list)
            else detail
        )
        super().__init__(text)


class BadRequestError(JobControlError):
    """A parameter job control does not understand (a labelSelector, a continue token)."""

    code = 400


class UnauthenticatedError(JobControlError):
    """No token, or one the API server does not accept."""

    code = 401


class ForbiddenError(JobControlError):
    """RBAC denies the caller the action."""

    code = 403


class NotFoundError(JobControlError):
    """No such job (or pod, or node rank in the current epoch)."""

    code = 404


class ConflictError(JobControlError):
    """A job of that name exists, or the object changed under the write."""

    code = 409


class GoneError(JobControlError):
    """The resource version asked for is no longer held by the API server."""

    code = 410


class InvalidError(JobControlError):
    """A manifest or request that breaks the TrainingJob's rules; `detail` names each field."""

    code = 422


class UpstreamError(JobControlError):
    """The kube API failed the call for a reason that is not the caller's: it refused the
    credentials the call carried (`kube_status` 401), or failed itself (5xx)."""

    code = 502

    def __init__(self, detail: str, kube_status: int) -> None:
        super().__init__(detail)
        self.kube_status = kube_status


class UnreachableError(JobControlError):
    """The kube API could not be reached at all."""

    code = 503

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"{server}: {reason}")
        self.server = server
