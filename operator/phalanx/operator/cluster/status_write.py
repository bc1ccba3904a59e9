"""A job's status written with optimistic concurrency, and what a refusal means.

The status is replaced (PUT on the status subresource) with the resourceVersion the plan was
made from: a job changed since is refused (409), and the reconcile starts again from the watch's
newer version. A job deleted since is refused the same way (its preconditions fail), so a 409 is
told apart by a read: a loop whose watch missed the deletion then stops (`loops`) instead of
writing for a job that is gone, over and over. Conflicts are rare (docs/figures.md, "Requests"),
so the read costs next to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.job import GROUP, PLURAL, VERSION, TrainingJob
from phalanx.models.status import TrainingJobStatus


class StatusConflictError(Exception):
    """The job changed since it was read; the reconcile must start again from fresh state."""


class JobGoneError(Exception):
    """The job is no longer in the API server, though no event said so (a watch that missed its
    deletion): its loop stops."""


def replace(
    custom: k8s.CustomObjectsApi, raw: Mapping[str, Any], job: TrainingJob,
    status: TrainingJobStatus,
) -> str:  # fmt: skip
    """Write `status` over the job read as `raw`; the job's new resourceVersion."""
    # Without managedFields, most of a job's metadata: the status subresource takes only the
    # status from the body, so they were bytes to send and decode for nothing.
    metadata = {k: v for k, v in raw.get("metadata", {}).items() if k != "managedFields"}
    body = {**raw, "metadata": metadata, "status": status.to_wire()}
    namespace, name = job.metadata.namespace or "default", job.metadata.name or ""
    try:
        result = custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body
        )
    except ApiException as error:
        if error.status == 404 or (error.status == 409 and gone(custom, namespace, name)):
            raise JobGoneError(str(error.reason)) from error
        if error.status == 409:
            raise StatusConflictError(str(error.reason)) from error
        raise
    return str(cast(dict[str, Any], result)["metadata"]["resourceVersion"])


def gone(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> bool:
    """Whether the job is no longer in the API server."""
    try:
        custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _preload_content=False
        )
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False
