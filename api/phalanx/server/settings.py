"""API service settings, from `PHALANX_API_*` environment variables or command-line flags."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServerSettings(BaseSettings):
    """How the API service runs. Every field is also a flag: `--port 8000`."""

    model_config = SettingsConfigDict(
        env_prefix="PHALANX_API_",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        frozen=True,
        use_attribute_docstrings=True,
    )

    kubeconfig: Path | None = None
    """Kubeconfig of the service's own identity; default: in-cluster, else $KUBECONFIG."""

    host: str = "0.0.0.0"
    """Address to listen on."""

    port: Annotated[int, Field(ge=1, le=65535)] = 8000
    """Port to listen on."""

    insecure_local_credentials: bool = False
    """Development only: skip caller authentication and act with the service's own rights."""

    authn_cache_seconds: Annotated[float, Field(ge=0)] = 30.0
    """How long a TokenReview result is reused for the same token."""

    authz_cache_seconds: Annotated[float, Field(ge=0)] = 10.0
    """How long a SubjectAccessReview decision is reused for the same caller and action."""

    page_size_max: Annotated[int, Field(ge=1)] = 500
    """The largest `limit` a list accepts."""


@lru_cache
def get_settings() -> ServerSettings:
    """The settings, read once (tests override the dependency instead)."""
    return ServerSettings()
