"""Job control over HTTP: list, get, create, delete, scale, suspend and resume.

Each route is an edge over `phalanx.control.JobControl` (reads from the watch cache, writes to
the API server, each after a SubjectAccessReview for the caller; a manifest validated with the
shared models, so a 422 names the field exactly as `kubectl apply` would); its errors become
HTTP answers in `phalanx.server.errors`. What stays here is HTTP: paths, parameters, status
codes and the OpenAPI document.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response, status

from phalanx.models import API_VERSION, KIND
from phalanx.models.responses import JobDetail, JobList, Problem, ScaleRequest
from phalanx.server.deps import CallerDep, ControlDep

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No valid bearer token"},
    403: {"model": Problem, "description": "RBAC denies the caller this action"},
}
ONE_JOB = {**ERRORS, 404: {"model": Problem, "description": "No such job"}}
UNREADABLE_BODY: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "The body is not JSON"}
}
MANIFEST_SCHEMA = {
    "type": "object",
    "required": ["metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": [API_VERSION]},
        "kind": {"type": "string", "enum": [KIND]},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {
                    "type": "string",
                    "maxLength": 63,
                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                },
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {"$ref": "#/components/schemas/TrainingJobSpec"},
    },
    "example": {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "llama-pretrain", "labels": {"team": "nlp"}},
        "spec": {
            "replicas": {"min": 2, "max": 4},
            "nprocPerNode": 8,
            "checkpoint": {"url": "s3://ckpt/llama-pretrain", "intervalSteps": 500},
            "template": {
                "spec": {"containers": [{"name": "trainer", "image": "phalanx/trainer:0.1"}]}
            },
        },
    },
}
"""The create body as documented: the manifest's shape, so clients can generate code from it.
The handler still takes any JSON object and validates it itself, to name each refused field."""
router = APIRouter(prefix="/api/v1", tags=["jobs"], responses=ERRORS)
DETAIL: dict[str, Any] = {"response_model": JobDetail, "response_model_exclude_none": True}


@router.get(
    "/jobs",
    operation_id="listJobs",
    response_model=JobList,
    responses={
        400: {"model": Problem, "description": "A labelSelector or continue not understood"}
    },
)
def list_jobs(
    control: ControlDep,
    caller: CallerDep,
    namespace: Annotated[str | None, Query(description="Only this namespace.")] = None,
    phase: Annotated[str | None, Query(description="Only jobs in this phase.")] = None,
    label_selector: Annotated[
        str | None, Query(alias="labelSelector", description="e.g. team=nlp,tier!=dev")
    ] = None,
    limit: Annotated[int, Query(ge=1, description="Page size.")] = 100,
    continue_: Annotated[
        str | None, Query(alias="continue", description="Token from the previous page.")
    ] = None,
) -> JobList:
    """Jobs the caller may list, filtered, a page at a time, from the watch cache."""
    return control.list(caller, namespace, phase, label_selector, limit, continue_)


@router.get(
    "/namespaces/{namespace}/jobs/{name}", operation_id="getJob", responses=ONE_JOB, **DETAIL
)
def get_job(namespace: str, name: str, control: ControlDep, caller: CallerDep) -> JobDetail:
    """A job with its status, conditions, progress, failures and last checkpoint."""
    return control.get(caller, namespace, name)


@router.post(
    "/namespaces/{namespace}/jobs",
    operation_id="createJob",
    status_code=status.HTTP_201_CREATED,
    responses={
        **ERRORS,
        **UNREADABLE_BODY,
        409: {"model": Problem, "description": "A job of that name exists"},
        422: {"model": Problem, "description": "Invalid manifest: each refused field named"},
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": MANIFEST_SCHEMA}}}},
    **DETAIL,
)
def create_job(
    namespace: str,
    manifest: Annotated[dict[str, Any], Body(description="A TrainingJob manifest.")],
    control: ControlDep,
    caller: CallerDep,
) -> JobDetail:
    """Create a job from a manifest, validated with the same rules as the CRD."""
    return control.create(caller, namespace, manifest)


@router.delete(
    "/namespaces/{namespace}/jobs/{name}",
    operation_id="deleteJob",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=ONE_JOB,
)
def delete_job(namespace: str, name: str, control: ControlDep, caller: CallerDep) -> Response:
    """Delete a job; its pods and other children follow (owner references)."""
    control.delete(caller, namespace, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/namespaces/{namespace}/jobs/{name}/scale",
    operation_id="scaleJob",
    responses={
        **ONE_JOB,
        **UNREADABLE_BODY,
        422: {"model": Problem, "description": "Outside replicas.min..max"},
    },
    **DETAIL,
)
def scale_job(
    namespace: str, name: str, request: ScaleRequest, control: ControlDep, caller: CallerDep
) -> JobDetail:
    """Set the desired number of node pods (spec.replicas.desired, within min..max)."""
    return control.scale(caller, namespace, name, request.nodes)


@router.post(
    "/namespaces/{namespace}/jobs/{name}/suspend",
    operation_id="suspendJob",
    responses=ONE_JOB,
    **DETAIL,
)
def suspend_job(namespace: str, name: str, control: ControlDep, caller: CallerDep) -> JobDetail:
    """Suspend: every pod is deleted (agents checkpoint first); resume continues from there."""
    return control.suspend(caller, namespace, name)


@router.post(
    "/namespaces/{namespace}/jobs/{name}/resume",
    operation_id="resumeJob",
    responses=ONE_JOB,
    **DETAIL,
)
def resume_job(namespace: str, name: str, control: ControlDep, caller: CallerDep) -> JobDetail:
    """Resume a suspended job: a new epoch starts from the last checkpoint."""
    return control.resume(caller, namespace, name)
