"""Job control's calls to the Kubernetes API, made with whichever client the edge holds: the
service's own (after the caller was authorised) or the user's kubeconfig.

Why one module: the kube API's refusals become job control's errors here, once
(`kube_errors`), with the API server's own message, and both edges read jobs the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from phalanx.control import errors
from phalanx.control.views import Job
from phalanx.listwatch import sync
from phalanx.listwatch.protocol import Query, Resource, WatchError
from phalanx.models import API_VERSION, GROUP, PLURAL, VERSION

KUBE_PAGE = 500
"""Jobs per list call when reading every job: a large cluster is not one huge answer."""
JOBS = Resource(f"/apis/{API_VERSION}", PLURAL)

_BY_STATUS: dict[int, type[errors.JobControlError]] = {
    400: errors.BadRequestError,
    403: errors.ForbiddenError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    410: errors.GoneError,
    422: errors.InvalidError,
}


def _message(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except ValueError:
        return str(error.reason)


def _by_status(status: int, message: str) -> errors.JobControlError:
    kind = _BY_STATUS.get(status)
    return errors.UpstreamError(message, status) if kind is None else kind(message)


@contextmanager
def kube_errors(server: str) -> Iterator[None]:
    """The kube API's refusals as job control's errors, in the API server's words; a kube API
    that cannot be reached at `server` as UnreachableError."""
    try:
        yield
    except ApiException as error:
        raise _by_status(int(error.status or 0), _message(error)) from error
    except WatchError as error:
        if not error.status:
            raise errors.UnreachableError(server, error.message) from error
        raise _by_status(error.status, error.message) from error
    except HTTPError as error:
        raise errors.UnreachableError(server, str(error)) from error


class KubeJobs:
    """TrainingJobs, their events and their pods' logs, with the client it was given."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.server: str = api.configuration.host
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def errors(self) -> AbstractContextManager[None]:
        """`with kube.errors():` the kube API's refusals as job control's errors."""
        return kube_errors(self.server)

    def create(self, namespace: str, manifest: dict[str, Any]) -> Job:
        with self.errors():
            created = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, manifest, field_validation="Strict"
            )
        return cast(dict[str, Any], created)

    def get(self, namespace: str, name: str) -> Job:
        with self.errors():
            job = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        return cast(dict[str, Any], job)

    def delete(self, namespace: str, name: str) -> None:
        with self.errors():
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background"
            )

    def patch_spec(self, namespace: str, name: str, spec: dict[str, Any]) -> Job:
        with self.errors():
            patched = self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
            )
        return cast(dict[str, Any], patched)

    def scale(self, namespace: str, name: str, nodes: int) -> None:
        with self.errors():
            self.custom.patch_namespaced_custom_object_scale(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": {"replicas": nodes}}
            )

    def events(self, namespace: str, name: str) -> list[k8s.CoreV1Event]:
        selector = f"involvedObject.name={name},involvedObject.kind=TrainingJob"
        with self.errors():
            listed = self.core.list_namespaced_event(namespace, field_selector=selector)
        return list(listed.items or [])

    def logs(
        self, namespace: str, pod: str, tail_lines: int | None, follow: bool
    ) -> Iterator[bytes]:
        """The pod's log as it streams. The request is made here, not when the stream is first
        read, so that a missing pod or a refusal is an error now, not a broken stream later."""
        with self.errors():
            response: Any = self.core.read_namespaced_pod_log(
                pod, namespace, follow=follow, tail_lines=tail_lines, _preload_content=False
            )

        def chunks() -> Iterator[bytes]:
            try:
                yield from response.stream(4096)
            finally:
                response.release_conn()

        return chunks()

    def changes(self, namespace: str, name: str) -> Iterator[Job | None]:
        """The job now, then at each change the kube API reports; None once it is deleted. The
        watch (`phalanx.listwatch`) goes on from the version it reached when the API server ends
        a stream, and reads the job afresh when that version is gone (410)."""
        job = self.get(namespace, name)
        yield job
        query = Query(JOBS, namespace, field_selector=f"metadata.name={name}")
        since = str(job["metadata"]["resourceVersion"])
        with self.errors():
            for change in sync.follow(self.api, query, retry=False, since=since):
                if change.kind == "DELETED" or (change.kind == "SYNCED" and not change.seen):
                    yield None
                    return
                if change.kind != "SYNCED":
                    yield cast(dict[str, Any], change.thing)


class KubeSource:
    """Jobs read straight from the kube API: job control's source where no watch cache runs
    (the CLI's kubeconfig mode)."""

    def __init__(self, kube: KubeJobs) -> None:
        self._kube = kube

    def get(self, namespace: str, name: str) -> Job | None:
        try:
            return self._kube.get(namespace, name)
        except errors.NotFoundError:
            return None

    def list(self, namespace: str | None, label_selector: str | None = None) -> Iterable[Job]:
        """Every job in `namespace` (None: all), read in chunks of KUBE_PAGE; the selector is
        sent along, so the kube API returns only matching jobs."""
        custom = self._kube.custom
        read = (
            partial(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
            if namespace is None
            else partial(custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL)
        )
        token = None
        while True:
            with self._kube.errors():
                chunk = read(label_selector=label_selector, limit=KUBE_PAGE, _continue=token)
            listed = cast(dict[str, Any], chunk)
            yield from listed.get("items") or []
            if not (token := (listed.get("metadata") or {}).get("continue")):
                return
