"""The cluster verbs straight against the kube API, with the user's kubeconfig: no API service
need run, and RBAC judges the user's own credentials.

Why it is thin: the verbs are job control's (`phalanx.control.JobControl`), the same core the
REST service runs, here with the user's client, the kube API as the source of jobs and no
authorizer of its own (the kube API authorises each call). So `phalanx get -o json` prints the
same whichever way the CLI talks, and a refusal reads the same. Job control's errors become the
SDK's here, once, so the verbs handle one kind. No FastAPI is needed.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Self

import httpx
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from phalanx.control import Caller, JobControl, KubeJobs, KubeSource, progress
from phalanx.control.errors import JobControlError, UnreachableError, UpstreamError
from phalanx.models.responses import EventList, JobDetail, JobList, JobSummary
from phalanx.sdk.calls import Manifest, manifest_dict
from phalanx.sdk.errors import PhalanxAPIError, error_for

USER = Caller("kubeconfig-user")
"""The caller job control sees here; the calls carry the user's own credentials."""


def _sdk_error(error: JobControlError) -> PhalanxAPIError:
    """The error the SDK raises for the same answer from the API service. Where the kube API
    failed the call otherwise, its own status is kept: a 401 is the user's own credentials
    refused here (the service says 502 then: they were *its* credentials)."""
    if isinstance(error, UpstreamError):
        return error_for(error.kube_status, error.detail)
    detail = error.detail
    return error_for(error.code, detail if isinstance(detail, str) else
                     [p.model_dump() for p in detail])  # fmt: skip


@contextmanager
def _errors() -> Iterator[None]:
    """Job control's errors as the SDK's; an unreachable kube API as httpx's, as the SDK would
    raise it for an unreachable service."""
    try:
        yield
    except UnreachableError as error:
        raise httpx.ConnectError(str(error)) from error
    except JobControlError as error:
        raise _sdk_error(error) from error


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Text lines from a byte stream cut anywhere (even inside a UTF-8 character)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    for chunk in chunks:
        *complete, pending = (pending + decoder.decode(chunk)).split("\n")
        yield from complete
    if pending := pending + decoder.decode(b"", final=True):
        yield pending


class DirectClient:
    """The SDK Client's methods (and a progress stream), against the kube API as the user."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.server: str = api.configuration.host
        self._api = api
        self._kube = KubeJobs(api)
        self._control = JobControl(source=KubeSource(self._kube), kube=self._kube)

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None, namespace: str | None) -> Self:
        """A client for `context` (default: the current one) of the kubeconfig at `path` (a
        $KUBECONFIG list of files too). Namespace: `namespace`, else the context's, else
        "default". ConfigException when the kubeconfig cannot be used."""
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration
        )
        contexts, current = k8s_config.list_kube_config_contexts(path)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts if c["name"] == context), None) if context else current
        context_namespace = ((chosen or {}).get("context") or {}).get("namespace")
        return cls(k8s.ApiClient(configuration), namespace or context_namespace or "default")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def create(self, manifest: Manifest) -> JobDetail:
        """Create a job in the manifest's namespace, else the client's (as the SDK does)."""
        body = manifest_dict(manifest)
        target = (body.get("metadata") or {}).get("namespace") or self.namespace
        with _errors():
            return self._control.create(USER, target, body)

    def get(self, name: str) -> JobDetail:
        with _errors():
            return self._control.get(USER, self.namespace, name)

    def list(
        self, *, all_namespaces: bool = False, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100,
    ) -> Iterator[JobList]:  # fmt: skip
        """Pages of jobs, filtered and paged as the API service does, from one read of the kube
        API."""
        namespace = None if all_namespaces else self.namespace
        with _errors():
            yield from self._control.pages(USER, namespace, phase, label_selector, limit)

    def scale(self, name: str, nodes: int) -> JobDetail:
        with _errors():
            return self._control.scale(USER, self.namespace, name, nodes)

    def suspend(self, name: str) -> JobDetail:
        with _errors():
            return self._control.suspend(USER, self.namespace, name)

    def resume(self, name: str) -> JobDetail:
        with _errors():
            return self._control.resume(USER, self.namespace, name)

    def delete(self, name: str) -> None:
        with _errors():
            self._control.delete(USER, self.namespace, name)

    def events(self, name: str) -> EventList:
        with _errors():
            return self._control.events(USER, self.namespace, name)

    def logs(
        self, name: str, node: int = 0, follow: bool = False, tail_lines: int | None = None
    ) -> Iterator[str]:
        """Log lines of node rank `node` of the current epoch: the pod the operator named
        `<job>-<epoch>-<node>`; 404 when the epoch has no such rank, as the service says."""
        with _errors():
            chunks = self._control.logs(USER, self.namespace, name, node, tail_lines, follow)
            yield from _lines(chunks)

    def progress(self, name: str) -> Iterator[JobSummary | None]:
        """The job's summary now and at each change, until it ends; None when it is deleted.
        The same contract as the service's progress stream, from a watch on the one job."""
        with _errors():
            self._control.watchable(USER, self.namespace, name)
            yield from progress(self._kube.changes(self.namespace, name))
