"""FastAPI dependencies: the settings, the cache, Kubernetes, and the authenticated caller."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request

from phalanx.server.auth import Action, Authorizer, Caller, ForbiddenError, UnauthenticatedError
from phalanx.server.cache import JobCache
from phalanx.server.kube import KubeJobs
from phalanx.server.settings import ServerSettings

LOCAL_CALLER = Caller("phalanx-api:service-credentials", service_credentials=True)


def get_cache(request: Request) -> JobCache:
    cache: JobCache = request.app.state.cache
    return cache


def get_kube(request: Request) -> KubeJobs:
    kube: KubeJobs = request.app.state.kube
    return kube


def get_authorizer(request: Request) -> Authorizer:
    authorizer: Authorizer = request.app.state.authorizer
    return authorizer


def get_server_settings(request: Request) -> ServerSettings:
    settings: ServerSettings = request.app.state.settings
    return settings


def get_caller(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """The caller, from its bearer token (401 without a valid one)."""
    if get_server_settings(request).insecure_local_credentials:
        return LOCAL_CALLER
    try:
        return get_authorizer(request).authenticate(authorization)
    except UnauthenticatedError as error:
        raise HTTPException(401, str(error), headers={"WWW-Authenticate": "Bearer"}) from error


CacheDep = Annotated[JobCache, Depends(get_cache)]
KubeDep = Annotated[KubeJobs, Depends(get_kube)]
AuthorizerDep = Annotated[Authorizer, Depends(get_authorizer)]
SettingsDep = Annotated[ServerSettings, Depends(get_server_settings)]
CallerDep = Annotated[Caller, Depends(get_caller)]


def cached_job(cache: JobCache, namespace: str, name: str) -> dict[str, Any]:
    """The job from the watch cache, or 404 in the API server's words."""
    job = cache.get(namespace, name)
    if job is None:
        raise HTTPException(404, f'trainingjobs.phalanx.dev "{name}" not found')
    return dict(job)


def allow(authorizer: Authorizer, caller: Caller, action: Action) -> None:
    """403 in the API server's words unless RBAC lets `caller` do `action`."""
    try:
        authorizer.authorize(caller, action)
    except ForbiddenError as error:
        raise HTTPException(403, str(error)) from error
