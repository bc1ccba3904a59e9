"""The service's calls to the Kubernetes API, made after the caller was authorised.

Why one small class: the routes stay about HTTP, and API errors are mapped to HTTP errors in one
place (`api_errors`), with the API server's own message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from fastapi import HTTPException
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models import GROUP, PLURAL, VERSION


@contextmanager
def api_errors() -> Iterator[None]:
    """Turn an ApiException into the HTTP error a client should see, with the server's words."""
    try:
        yield
    except ApiException as error:
        try:
            message = json.loads(error.body or "{}").get("message") or error.reason
        except ValueError:
            message = error.reason
        status = error.status if error.status in (400, 403, 404, 409, 410, 422) else 502
        raise HTTPException(status_code=status, detail=str(message)) from error


class KubeJobs:
    """TrainingJobs, their events and their pods' logs, with the service's credentials."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def create(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        with api_errors():
            created = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, manifest, field_validation="Strict"
            )
        return cast(dict[str, Any], created)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        with api_errors():
            job = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        return cast(dict[str, Any], job)

    def delete(self, namespace: str, name: str) -> None:
        with api_errors():
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Background"
            )

    def patch_spec(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        with api_errors():
            patched = self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
            )
        return cast(dict[str, Any], patched)

    def scale(self, namespace: str, name: str, nodes: int) -> None:
        with api_errors():
            self.custom.patch_namespaced_custom_object_scale(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": {"replicas": nodes}}
            )

    def events(self, namespace: str, name: str) -> list[k8s.CoreV1Event]:
        selector = f"involvedObject.name={name},involvedObject.kind=TrainingJob"
        with api_errors():
            listed = self.core.list_namespaced_event(namespace, field_selector=selector)
        return list(listed.items or [])

    def logs(
        self, namespace: str, pod: str, tail_lines: int | None, follow: bool
    ) -> Iterator[bytes]:
        """The pod's log as it streams. The request is made here, not when the stream is first
        read, so that a missing pod or a refusal is an HTTP error, not a broken 200 stream."""
        with api_errors():
            response: Any = self.core.read_namespaced_pod_log(
                pod, namespace, follow=follow, tail_lines=tail_lines, _preload_content=False
            )

        def chunks() -> Iterator[bytes]:
            try:
                yield from response.stream(4096)
            finally:
                response.release_conn()

        return chunks()
