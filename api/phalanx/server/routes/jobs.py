"""Job control: list, get, create, delete, scale, suspend and resume.

Reads come from the watch cache after a SubjectAccessReview for the caller; writes go to the API
server after one. A manifest is validated with the shared models first, so a 422 names the field
exactly as `kubectl apply` would.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query, Response, status
from pydantic import ValidationError

from phalanx.models import API_VERSION, KIND, TrainingJob, field_errors
from phalanx.server import views
from phalanx.server.auth import Action
from phalanx.server.deps import (
    AuthorizerDep,
    CacheDep,
    CallerDep,
    KubeDep,
    SettingsDep,
    allow,
    cached_job,
)
from phalanx.server.schemas import JobDetail, JobList, Problem, ScaleRequest

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


@router.get(
    "/jobs",
    operation_id="listJobs",
    response_model=JobList,
    responses={
        400: {"model": Problem, "description": "A labelSelector or continue not understood"}
    },
)
def list_jobs(
    cache: CacheDep,
    caller: CallerDep,
    authorizer: AuthorizerDep,
    settings: SettingsDep,
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
    allow(authorizer, caller, Action("list", namespace))
    try:
        selector = views.parse_selector(label_selector)
        jobs = [j for j in cache.list(namespace) if views.matches(j, phase, selector)]
        return views.page(jobs, min(limit, settings.page_size_max), continue_)
    except ValueError as error:
        raise HTTPException(400, str(error)) from error


@router.get(
    "/namespaces/{namespace}/jobs/{name}",
    operation_id="getJob",
    response_model=JobDetail,
    response_model_exclude_none=True,
    responses=ONE_JOB,
)
def get_job(
    namespace: str, name: str, cache: CacheDep, caller: CallerDep, authorizer: AuthorizerDep
) -> JobDetail:
    """A job with its status, conditions, progress, failures and last checkpoint."""
    allow(authorizer, caller, Action("get", namespace, name))
    return views.detail(cached_job(cache, namespace, name))


def _validated(namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = {"apiVersion": API_VERSION, "kind": KIND, **manifest}
    meta = manifest.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise HTTPException(422, [{"field": "metadata", "message": "must be an object"}])
    if meta.setdefault("namespace", namespace) != namespace:
        message = f"must be {namespace!r}, the namespace in the path, or left out"
        raise HTTPException(422, [{"field": "metadata.namespace", "message": message}])
    if not meta.get("name"):
        raise HTTPException(422, [{"field": "metadata.name", "message": "Required value"}])
    try:
        TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        detail = [{"field": e.field, "message": e.message} for e in field_errors(error)]
        raise HTTPException(422, detail) from error
    return manifest


@router.post(
    "/namespaces/{namespace}/jobs",
    operation_id="createJob",
    response_model=JobDetail,
    response_model_exclude_none=True,
    status_code=status.HTTP_201_CREATED,
    responses={
        **ERRORS,
        **UNREADABLE_BODY,
        409: {"model": Problem, "description": "A job of that name exists"},
        422: {"model": Problem, "description": "Invalid manifest: each refused field named"},
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"schema": MANIFEST_SCHEMA}}}},
)
def create_job(
    namespace: str,
    manifest: Annotated[dict[str, Any], Body(description="A TrainingJob manifest.")],
    kube: KubeDep,
    caller: CallerDep,
    authorizer: AuthorizerDep,
) -> JobDetail:
    """Create a job from a manifest, validated with the same rules as the CRD."""
    allow(authorizer, caller, Action("create", namespace))
    return views.detail(kube.create(namespace, _validated(namespace, manifest)))


@router.delete(
    "/namespaces/{namespace}/jobs/{name}",
    operation_id="deleteJob",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=ONE_JOB,
)
def delete_job(
    namespace: str, name: str, kube: KubeDep, caller: CallerDep, authorizer: AuthorizerDep
) -> Response:
    """Delete a job; its pods and other children follow (owner references)."""
    allow(authorizer, caller, Action("delete", namespace, name))
    kube.delete(namespace, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/namespaces/{namespace}/jobs/{name}/scale",
    operation_id="scaleJob",
    response_model=JobDetail,
    response_model_exclude_none=True,
    responses={
        **ONE_JOB,
        **UNREADABLE_BODY,
        422: {"model": Problem, "description": "Outside replicas.min..max"},
    },
)
def scale_job(
    namespace: str,
    name: str,
    request: ScaleRequest,
    kube: KubeDep,
    caller: CallerDep,
    authorizer: AuthorizerDep,
) -> JobDetail:
    """Set the desired number of node pods (spec.replicas.desired, within min..max)."""
    allow(authorizer, caller, Action("update", namespace, name, subresource="scale"))
    replicas = kube.get(namespace, name)["spec"]["replicas"]
    if not replicas["min"] <= request.nodes <= replicas["max"]:
        message = (
            f"spec.replicas.desired must be within spec.replicas.min..spec.replicas.max "
            f"({replicas['min']}..{replicas['max']}), got {request.nodes}"
        )
        raise HTTPException(422, [{"field": "spec.replicas.desired", "message": message}])
    kube.scale(namespace, name, request.nodes)
    return views.detail(kube.get(namespace, name))


def _set_suspend(
    namespace: str, name: str, value: bool, kube: KubeDep, caller: CallerDep, auth: AuthorizerDep
) -> JobDetail:
    allow(auth, caller, Action("patch", namespace, name))
    return views.detail(kube.patch_spec(namespace, name, {"suspend": value}))


@router.post(
    "/namespaces/{namespace}/jobs/{name}/suspend",
    operation_id="suspendJob",
    response_model=JobDetail,
    response_model_exclude_none=True,
    responses=ONE_JOB,
)
def suspend_job(
    namespace: str, name: str, kube: KubeDep, caller: CallerDep, authorizer: AuthorizerDep
) -> JobDetail:
    """Suspend: every pod is deleted (agents checkpoint first); resume continues from there."""
    return _set_suspend(namespace, name, True, kube, caller, authorizer)


@router.post(
    "/namespaces/{namespace}/jobs/{name}/resume",
    operation_id="resumeJob",
    response_model=JobDetail,
    response_model_exclude_none=True,
    responses=ONE_JOB,
)
def resume_job(
    namespace: str, name: str, kube: KubeDep, caller: CallerDep, authorizer: AuthorizerDep
) -> JobDetail:
    """Resume a suspended job: a new epoch starts from the last checkpoint."""
    return _set_suspend(namespace, name, False, kube, caller, authorizer)
