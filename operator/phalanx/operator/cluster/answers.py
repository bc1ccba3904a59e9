"""What the API server's refusals mean for the operator: which answers are success in disguise
(409 on a create of what exists, 404 on a delete of what is gone), which say that the same
object will be refused again, and the API server's own words for a condition or an event."""

from __future__ import annotations

import json
from collections.abc import Callable

import urllib3
from kubernetes.client.exceptions import ApiException

from phalanx.models.job import TrainingJob
from phalanx.operator.planner import ChildRefusal

INVALID = 422
"""The API server's answer to an object it will never accept as it is (Status reason Invalid)."""
BAD_REQUEST = 400
FORBIDDEN = 403

STRICT_DECODING_REFUSAL = "strict decoding error"
"""How the API server words an object with an unknown or duplicated field under strict field
validation (a 400 that names the field: 'unknown field "spec.containers[0].resourcs"')."""


def discard(answer: object) -> None:
    """Read and let go of an answer asked for with `_preload_content=False`: the executor's
    writes need only their status (an error status raises ApiException before this, its body
    read). Turning a created pod's JSON into the client's model objects was much of the CPU its
    create cost (docs/figures.md, "CPU")."""
    if isinstance(answer, urllib3.HTTPResponse):
        answer.read()
        answer.release_conn()


def tolerate(error: ApiException, *codes: int) -> None:
    if error.status not in codes:
        raise error


POD_SECURITY_REFUSAL = "violates PodSecurity"
"""How the API server's PodSecurity admission words a pod it does not admit (a 403): like an
Invalid object, the same pod is refused until the template changes. Other 403s (RBAC, a quota)
are not about the spec and stay errors that are retried."""


MISSING_SERVICE_ACCOUNT = "error looking up service account"
"""How the ServiceAccount admission words a pod whose serviceAccountName does not exist (a 403:
'error looking up service account ns/name: serviceaccount "name" not found')."""


def refuses_for_good(error: ApiException) -> bool:
    """Whether the API server refused this very object, so that creating it again is futile."""
    if error.status == INVALID:
        return True
    if error.status == BAD_REQUEST:
        return STRICT_DECODING_REFUSAL in api_message(error)
    return error.status == FORBIDDEN and POD_SECURITY_REFUSAL in api_message(error)


def waits_for_an_object(error: ApiException) -> bool:
    """Whether the API server refused the object for want of another one the spec names (a
    ServiceAccount): refused until that object exists, which needs no change to the spec."""
    return error.status == FORBIDDEN and MISSING_SERVICE_ACCOUNT in api_message(error)


def api_message(error: ApiException) -> str:
    """The API server's own words: the Status message in the body, else the HTTP reason."""
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or error.reason or error.status)


class ChildRefusedError(Exception):
    """The API server refused a child object of the job for good (`refuses_for_good`)."""

    def __init__(self, refusal: ChildRefusal) -> None:
        super().__init__(f"{refusal.kind} {refusal.name}: {refusal.message}")
        self.refusal = refusal


def refusable(job: TrainingJob, kind: str, name: str, call: Callable[[], object]) -> None:
    """Run `call`, which writes the job's `kind` `name`; the API server's refusal of that object
    itself (its admission says no to this spec: a pod's template, a Workload Kueue's webhook
    rejects) raises ChildRefusedError, which the planner turns into the job's
    ConfigurationError instead of a write retried forever; so does a refusal for want of an
    object the spec names (a ServiceAccount), which the planner tries again until it exists."""
    try:
        call()
    except ApiException as error:
        lasting = refuses_for_good(error)
        if not lasting and not waits_for_an_object(error):
            raise
        refusal = ChildRefusal(
            kind=kind, name=name, message=api_message(error), generation=job.metadata.generation,
            lasting=lasting,
        )  # fmt: skip
        raise ChildRefusedError(refusal) from error
