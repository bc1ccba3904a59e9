"""API service settings, from `PHALANX_API_*` environment variables or command-line flags."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator
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

    host: str = "127.0.0.1"
    """Address to listen on (beyond loopback: TLS, or `insecure_http`)."""

    port: Annotated[int, Field(ge=1, le=65535)] = 8000
    """Port to listen on."""

    tls_cert_file: Path | None = None
    """PEM certificate (chain) the service presents; with `tls_key_file`, it serves HTTPS."""

    tls_key_file: Path | None = None
    """PEM private key of `tls_cert_file`."""

    insecure_http: bool = False
    """Serve plain HTTP on an address other than loopback. Callers send bearer tokens: without
    TLS anyone on the path reads them. Development only; behind a TLS-terminating proxy at
    least."""

    insecure_local_credentials: bool = False
    """Development only: skip caller authentication and act with the service's own rights."""

    token_audiences: list[str] = ["phalanx-api"]
    """Audiences a caller's token must be issued for (`kubectl create token NAME --audience
    phalanx-api`; an OIDC provider's client id for people). A token for the kube API's own
    audience is refused, so that a token given to this service cannot act on the cluster
    directly. Empty: any token the API server accepts, including the cluster's own."""

    authn_cache_seconds: Annotated[float, Field(ge=0)] = 30.0
    """How long a TokenReview result is reused for the same token."""

    authz_cache_seconds: Annotated[float, Field(ge=0)] = 10.0
    """How long a SubjectAccessReview decision is reused for the same caller and action."""

    page_size_max: Annotated[int, Field(ge=1)] = 500
    """The largest `limit` a list accepts."""

    @model_validator(mode="after")
    def _tls_or_said_otherwise(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: set both or neither")
        if self.tls_cert_file is None and not self.insecure_http and not _loopback(self.host):
            raise ValueError(
                f"host {self.host!r}: serving plain HTTP beyond loopback sends callers' bearer "
                "tokens in the clear; set tls_cert_file and tls_key_file "
                "(PHALANX_API_TLS_CERT_FILE, PHALANX_API_TLS_KEY_FILE), or insecure_http "
                "(PHALANX_API_INSECURE_HTTP=true) to accept that"
            )
        return self

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None


def _loopback(host: str) -> bool:
    """Whether `host` is a loopback address or name (where nobody else sees the traffic)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache
def get_settings() -> ServerSettings:
    """The settings, read once (tests override the dependency instead)."""
    return ServerSettings()
