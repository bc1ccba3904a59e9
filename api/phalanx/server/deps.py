"""FastAPI dependencies: the settings, the watch cache, job control, and the authenticated
caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from phalanx.control import Caller, JobControl
from phalanx.server.cache import JobCache
from phalanx.server.settings import ServerSettings

LOCAL_CALLER = Caller("phalanx-api:service-credentials", service_credentials=True)


def get_cache(request: Request) -> JobCache:
    cache: JobCache = request.app.state.cache
    return cache


def get_control(request: Request) -> JobControl:
    control: JobControl = request.app.state.control
    return control


def get_server_settings(request: Request) -> ServerSettings:
    settings: ServerSettings = request.app.state.settings
    return settings


def get_caller(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Caller:
    """The caller, from its bearer token (UnauthenticatedError, a 401, without a valid one)."""
    if get_server_settings(request).insecure_local_credentials:
        return LOCAL_CALLER
    authorizer = get_control(request).authorizer
    assert authorizer is not None, "the service always authorises its callers"
    return authorizer.authenticate(authorization)


CacheDep = Annotated[JobCache, Depends(get_cache)]
ControlDep = Annotated[JobControl, Depends(get_control)]
SettingsDep = Annotated[ServerSettings, Depends(get_server_settings)]
CallerDep = Annotated[Caller, Depends(get_caller)]
