"""The cluster verbs straight against the kube API, with the user's kubeconfig: no API service
need run, and RBAC judges the user's own credentials.

Why it runs the service's code: the API service's routes hold what each write means (a manifest
checked with the shared models, scale within replicas.min..max, suspend as a spec patch) and
`KubeJobs` makes the calls; here they run with the user's client instead of the service's, and
`views` shapes the answers. So `phalanx get -o json` prints the same whichever way the CLI talks,
and a refusal reads the same. Errors come out as the SDK's, so the verbs handle one kind.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Self, cast

import httpx
from fastapi import HTTPException
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from phalanx.models import GROUP, PLURAL, VERSION
from phalanx.sdk.calls import ENDED, Manifest, manifest_dict
from phalanx.sdk.errors import PhalanxAPIError, raise_for
from phalanx.server import views
from phalanx.server.auth import Authorizer, Caller
from phalanx.server.kube import KubeJobs, api_errors
from phalanx.server.routes import jobs as routes
from phalanx.server.schemas import JobDetail, JobList, JobSummary, ScaleRequest

KUBE_PAGE = 500
WATCH_SECONDS = 240
USER = Caller("kubeconfig-user", service_credentials=True)
"""The routes' caller here. `service_credentials` skips their SubjectAccessReview: the calls
carry the user's own credentials, and the kube API authorises each one itself."""


def _sdk_error(error: HTTPException) -> PhalanxAPIError:
    """The error the SDK raises for the same answer from the API service.

    The kube API's own status is kept where it had one: the service says 502 when the kube API
    refuses *its* credentials (401), but here the credentials are the user's."""
    cause = error.__cause__
    status = cause.status if isinstance(cause, ApiException) and cause.status else error.status_code
    try:
        raise_for(httpx.Response(status, json={"detail": error.detail}))
    except PhalanxAPIError as sdk_error:
        return sdk_error
    return PhalanxAPIError(status, error.detail)


@contextmanager
def _errors(server: str) -> Iterator[None]:
    """Kube API errors, in the API server's words, as the SDK's errors; an unreachable API server
    as httpx's, as the SDK would raise it."""
    try:
        with api_errors():
            yield
    except HTTPException as error:
        raise _sdk_error(error) from error
    except HTTPError as error:
        raise httpx.ConnectError(f"{server}: {error}") from error


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
        self._custom = k8s.CustomObjectsApi(api)
        self._authorizer = Authorizer(api, 0.0, 0.0)  # never asked: USER skips the review

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
        with _errors(self.server):
            return routes.create_job(target, body, self._kube, USER, self._authorizer)

    def get(self, name: str) -> JobDetail:
        with _errors(self.server):
            return views.detail(self._kube.get(self.namespace, name))

    def list(
        self, *, all_namespaces: bool = False, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100,
    ) -> Iterator[JobList]:  # fmt: skip
        """Pages of jobs, filtered and paged as the API service does, from one read of the kube
        API (the selector is also sent along, so the kube API returns only matching jobs)."""
        with _errors(self.server):
            try:
                selector = views.parse_selector(label_selector)
            except views.BadSelectorError as error:
                raise HTTPException(400, str(error)) from error
            found = self._read_all(all_namespaces, label_selector)
            jobs = sorted(
                (j for j in found if views.matches(j, phase, selector)),
                key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]),
            )
        token = None
        while True:
            page = views.page(jobs, limit, token)
            yield page
            if not (token := page.continue_):
                return

    def _read_all(self, all_namespaces: bool, label_selector: str | None) -> Iterator[Any]:
        """Every job in scope, read in chunks so a large cluster is not one huge answer."""
        read = (
            partial(self._custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
            if all_namespaces
            else partial(
                self._custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL
            )
        )
        token = None
        while True:
            chunk = read(label_selector=label_selector, limit=KUBE_PAGE, _continue=token)
            listed = cast(dict[str, Any], chunk)
            yield from listed.get("items") or []
            if not (token := (listed.get("metadata") or {}).get("continue")):
                return

    def scale(self, name: str, nodes: int) -> JobDetail:
        with _errors(self.server):
            return routes.scale_job(
                self.namespace, name, ScaleRequest(nodes=nodes), self._kube, USER, self._authorizer
            )

    def suspend(self, name: str) -> JobDetail:
        with _errors(self.server):
            return routes.suspend_job(self.namespace, name, self._kube, USER, self._authorizer)

    def resume(self, name: str) -> JobDetail:
        with _errors(self.server):
            return routes.resume_job(self.namespace, name, self._kube, USER, self._authorizer)

    def delete(self, name: str) -> None:
        with _errors(self.server):
            routes.delete_job(self.namespace, name, self._kube, USER, self._authorizer)

    def logs(
        self, name: str, node: int = 0, follow: bool = False, tail_lines: int | None = None
    ) -> Iterator[str]:
        """Log lines of node rank `node` of the current epoch: the pod the operator named
        `<job>-<epoch>-<node>`; 404 when the epoch has no such rank, as the service says."""
        with _errors(self.server):
            try:
                pod = views.node_pod(self._kube.get(self.namespace, name), node)
            except views.NoSuchRankError as error:
                raise HTTPException(404, str(error)) from error
            yield from _lines(self._kube.logs(self.namespace, pod, tail_lines, follow))

    def progress(self, name: str) -> Iterator[JobSummary | None]:
        """The job's summary now and at each change, until it ends; None when it is deleted.
        The same contract as the service's progress stream, from a watch on the one job."""
        last = None
        with _errors(self.server):
            for kind, job in self._changes(name):
                if kind == "DELETED":
                    yield None
                    return
                summary = views.summary(job)
                if summary != last:
                    last = summary
                    yield summary
                if summary.phase in ENDED:
                    return

    def _changes(self, name: str) -> Iterator[tuple[str, Any]]:
        """("MODIFIED", job) now, then each watch event on it. Every WATCH_SECONDS the watch
        starts again from a fresh read, as it does when the API server no longer holds the
        version it was at (410)."""
        while True:
            job = self._kube.get(self.namespace, name)
            yield "MODIFIED", job
            events = watch.Watch().stream(  # type: ignore[no-untyped-call]
                self._custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace,
                PLURAL, field_selector=f"metadata.name={name}",
                resource_version=job["metadata"]["resourceVersion"],
                timeout_seconds=WATCH_SECONDS, allow_watch_bookmarks=True,
            )  # fmt: skip
            try:
                for event in events:  # an ERROR event is raised as an ApiException
                    if event["type"] != "BOOKMARK":
                        yield event["type"], event["object"]
            except ApiException as error:
                if error.status != 410:  # 410 Gone: read the job afresh and watch from there
                    raise
