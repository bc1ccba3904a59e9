"""Job control: list, get, create, scale, suspend, resume, delete, and a job's events, logs,
checkpoints and progress: what each verb means, who may do it, and what it answers.

Why one core with no HTTP in it: the REST service and the CLI's kubeconfig mode are two edges of
the same verbs. Each gives this core a source to read jobs from (the service's watch cache, or
the kube API itself), a `KubeJobs` holding its client, and an authorizer where the calls carry
the service's credentials; the rules (a manifest checked with the shared models, scale within
replicas.min..max, suspend as a spec patch, RBAC through SubjectAccessReview) and the answers
live here once, so the edges cannot disagree, and each maps `control.errors` once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from phalanx.control import views
from phalanx.control.auth import Action, Authorizer, Caller
from phalanx.control.errors import InvalidError, NotFoundError
from phalanx.control.kube import KubeJobs
from phalanx.control.views import Job
from phalanx.models import API_VERSION, KIND, TrainingJob, field_errors
from phalanx.models.events import JobEvent
from phalanx.models.responses import (
    Checkpoints,
    EventList,
    FieldProblem,
    JobDetail,
    JobList,
    JobSummary,
)
from phalanx.models.status import ENDED


class JobSource(Protocol):
    """Where job control reads jobs: a watch cache, or the kube API itself."""

    def get(self, namespace: str, name: str) -> Job | None:
        """The job, or None if there is none."""
        ...

    def list(self, namespace: str | None, label_selector: str | None = None) -> Iterable[Job]:
        """Jobs in `namespace` (None: every namespace). A source may use `label_selector` to
        read less; job control filters by it either way."""
        ...


def _invalid(field: str, message: str) -> InvalidError:
    return InvalidError([FieldProblem(field=field, message=message)])


def validated(namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest to create in `namespace`, apiVersion and kind filled in; InvalidError naming
    each refused field, as `kubectl apply` would."""
    manifest = {"apiVersion": API_VERSION, "kind": KIND, **manifest}
    meta = manifest.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise _invalid("metadata", "must be an object")
    if meta.setdefault("namespace", namespace) != namespace:
        message = f"must be {namespace!r}, the namespace in the path, or left out"
        raise _invalid("metadata.namespace", message)
    if not meta.get("name"):
        raise _invalid("metadata.name", "Required value")
    try:
        TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        problems = [FieldProblem(field=e.field, message=e.message) for e in field_errors(error)]
        raise InvalidError(problems) from error
    return manifest


def _event(event: Any) -> JobEvent:
    """A Kubernetes Event (CoreV1Event) as the one event model."""
    return JobEvent(
        time=event.last_timestamp or event.event_time or event.first_timestamp,
        type="Warning" if event.type == "Warning" else "Normal",
        reason=event.reason or "",
        message=event.message or "",
        count=event.count,
    )


@dataclass
class JobControl:
    """The verbs, for one edge: its source of jobs, its client, and who authorises."""

    source: JobSource
    kube: KubeJobs
    authorizer: Authorizer | None = None
    """Asked before each verb where calls carry the service's credentials; None where they
    carry the caller's own (the kube API then authorises each call itself)."""
    page_size_max: int | None = None
    """The most jobs one page may hold, whatever the caller asks for."""

    def _allow(self, caller: Caller, action: Action) -> None:
        if self.authorizer is not None:
            self.authorizer.authorize(caller, action)

    def _job(self, namespace: str, name: str) -> Job:
        job = self.source.get(namespace, name)
        if job is None:
            raise NotFoundError(f'trainingjobs.phalanx.dev "{name}" not found')
        return job

    def _selected(
        self, namespace: str | None, phase: str | None, label_selector: str | None
    ) -> list[Job]:
        selector = views.parse_selector(label_selector)
        found = self.source.list(namespace, label_selector)
        return sorted(
            (j for j in found if views.matches(j, phase, selector)),
            key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]),
        )

    def _limit(self, limit: int) -> int:
        return min(limit, self.page_size_max) if self.page_size_max else limit

    def list(
        self, caller: Caller, namespace: str | None, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100, continue_: str | None = None,
    ) -> JobList:  # fmt: skip
        """One page of the jobs the caller may list, filtered, after the continue token."""
        self._allow(caller, Action("list", namespace))
        jobs = self._selected(namespace, phase, label_selector)
        return views.page(jobs, self._limit(limit), continue_)

    def pages(
        self, caller: Caller, namespace: str | None, phase: str | None = None,
        label_selector: str | None = None, limit: int = 100,
    ) -> Iterator[JobList]:  # fmt: skip
        """Every page, from one read of the source."""
        self._allow(caller, Action("list", namespace))
        jobs = self._selected(namespace, phase, label_selector)
        token = None
        while True:
            page = views.page(jobs, self._limit(limit), token)
            yield page
            if not (token := page.continue_):
                return

    def get(self, caller: Caller, namespace: str, name: str) -> JobDetail:
        """The job with its status, conditions, progress, failures and last checkpoint."""
        self._allow(caller, Action("get", namespace, name))
        return views.detail(self._job(namespace, name))

    def create(self, caller: Caller, namespace: str, manifest: dict[str, Any]) -> JobDetail:
        """Create a job from a manifest, validated with the same rules as the CRD."""
        self._allow(caller, Action("create", namespace))
        return views.detail(self.kube.create(namespace, validated(namespace, manifest)))

    def delete(self, caller: Caller, namespace: str, name: str) -> None:
        """Delete a job; its pods and other children follow (owner references)."""
        self._allow(caller, Action("delete", namespace, name))
        self.kube.delete(namespace, name)

    def scale(self, caller: Caller, namespace: str, name: str, nodes: int) -> JobDetail:
        """Set the desired number of node pods (spec.replicas.desired, within min..max). RBAC is
        asked about what is done: a patch of the scale subresource, and a get of the job (its
        min..max is read, and the answer is the job)."""
        self._allow(caller, Action("patch", namespace, name, subresource="scale"))
        self._allow(caller, Action("get", namespace, name))
        replicas = self.kube.get(namespace, name)["spec"]["replicas"]
        if not replicas["min"] <= nodes <= replicas["max"]:
            message = (
                f"spec.replicas.desired must be within spec.replicas.min..spec.replicas.max "
                f"({replicas['min']}..{replicas['max']}), got {nodes}"
            )
            raise _invalid("spec.replicas.desired", message)
        self.kube.scale(namespace, name, nodes)
        return views.detail(self.kube.get(namespace, name))

    def suspend(self, caller: Caller, namespace: str, name: str) -> JobDetail:
        """Suspend: every pod is deleted (agents checkpoint first); resume continues there."""
        return self._set_suspend(caller, namespace, name, True)

    def resume(self, caller: Caller, namespace: str, name: str) -> JobDetail:
        """Resume a suspended job: a new epoch starts from the last checkpoint."""
        return self._set_suspend(caller, namespace, name, False)

    def _set_suspend(self, caller: Caller, namespace: str, name: str, value: bool) -> JobDetail:
        self._allow(caller, Action("patch", namespace, name))
        return views.detail(self.kube.patch_spec(namespace, name, {"suspend": value}))

    def events(self, caller: Caller, namespace: str, name: str) -> EventList:
        """The job's Kubernetes events (Started, Restart, Shrink, Grow, Hang...), oldest first."""
        self._allow(caller, Action("list", namespace, resource="events", group=""))
        items = [_event(e) for e in self.kube.events(namespace, name)]
        return EventList(items=sorted(items, key=lambda e: (e.time is None, e.time)))

    def logs(
        self, caller: Caller, namespace: str, name: str, node: int = 0,
        tail_lines: int | None = None, follow: bool = False,
    ) -> Iterator[bytes]:  # fmt: skip
        """The log of node rank `node` of the current epoch (pod `<job>-<epoch>-<node>`), as it
        streams; NotFoundError when the epoch has no such rank. The caller must be able to get
        the job before it is looked up (else a 404 would tell a stranger that it exists), then
        to read that pod's log."""
        self._allow(caller, Action("get", namespace, name))
        pod = views.node_pod(self._job(namespace, name), node)
        self._allow(caller, Action("get", namespace, pod, "pods", "", "log"))
        return self.kube.logs(namespace, pod, tail_lines, follow)

    def checkpoints(self, caller: Caller, namespace: str, name: str) -> Checkpoints:
        """Where the job checkpoints, its retention, the newest valid checkpoint, and the cadence
        the program really saves at (as reported) beside the one the spec asks for."""
        return views.checkpoints(self.get(caller, namespace, name))

    def watchable(self, caller: Caller, namespace: str, name: str) -> None:
        """Check that the caller may watch the job and that it exists, before a stream starts
        (so a refusal is an error, not a broken stream)."""
        self._allow(caller, Action("watch", namespace, name))
        self._job(namespace, name)


def progress(changes: Iterable[Job | None]) -> Iterator[JobSummary | None]:
    """The job's summary at each change that alters it, until it ends; None when it is
    deleted. `changes` is the job now and after each change (None once it is gone)."""
    last = None
    for job in changes:
        if job is None:
            yield None
            return
        summary = views.summary(job)
        if summary != last:
            last = summary
            yield summary
        if summary.phase in ENDED:
            return
