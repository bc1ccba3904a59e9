"""The one list-and-watch (`phalanx.listwatch`) against the real API server, over both carriers:
a list read page by page, the watch's changes from its version, a bookmark that moves the
version without a change, a version the API server no longer has (410), and a refusal in the
API server's words."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from kubernetes import client as k8s

from harness.controlplane import ControlPlane
from harness.jobs import job_manifest
from phalanx.kubeconfig import load_configuration
from phalanx.listwatch import aio, sync
from phalanx.listwatch.protocol import Change, ExpiredError, Query, Reading, Resource, WatchError
from phalanx.models import GROUP, PLURAL, VERSION
from phalanx.operator.cluster import kube

PODS = Resource("/api/v1", "pods")
JOBS = Resource(f"/apis/{GROUP}/{VERSION}", PLURAL)
DEADLINE_SECONDS = 30.0
CLOSE_SECONDS = kube.KopfSessions.CLOSE_SECONDS
"""A closed session's TLS connections finish closing a turn of the loop later."""


def _pod(name: str) -> dict[str, Any]:
    metadata = {"name": name, "labels": {"l": "x"}}
    spec = {"containers": [{"name": "c", "image": "x"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _create_jobs(kube_client: k8s.ApiClient, namespace: str, *names: str) -> None:
    custom = k8s.CustomObjectsApi(kube_client)
    for name in names:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, job_manifest(name)
        )


def _names(changes: list[Change], kind: str) -> list[str]:
    return [c.thing["metadata"]["name"] for c in changes if c.kind == kind]


def _aio(control_plane: ControlPlane) -> tuple[aio.SessionFactory, str]:
    configuration = load_configuration(control_plane.kubeconfig)
    return (lambda: kube.aiohttp_session(configuration, limit=1)), configuration.host


def test_aio_reads_every_page_then_the_watch_from_the_lists_version(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_client)
    for rank in range(5):
        core.create_namespaced_pod(namespace, _pod(f"p-{rank}"))
    session, host = _aio(control_plane)

    async def scenario() -> list[Change]:
        seen: list[Change] = []
        stream = aio.follow(session, host, Query(PODS, namespace, label_selector="l", page=2))
        async with asyncio.timeout(DEADLINE_SECONDS):
            async for change in stream:
                seen.append(change)
                if change.kind == "SYNCED":
                    await asyncio.to_thread(core.delete_namespaced_pod, "p-0", namespace)
                if change.kind == "DELETED":
                    break
        await stream.aclose()
        await asyncio.sleep(CLOSE_SECONDS)
        return seen

    seen = asyncio.run(scenario())
    assert sorted(_names(seen, "LISTED")) == [f"p-{rank}" for rank in range(5)], "three pages"
    synced = next(c for c in seen if c.kind == "SYNCED")
    assert len(synced.seen) == 5
    assert _names(seen, "DELETED") == ["p-0"]


def test_aio_a_version_the_api_server_no_longer_has_is_expired(
    control_plane: ControlPlane, namespace: str
) -> None:
    session, host = _aio(control_plane)

    async def scenario() -> None:
        reading = Reading(Query(PODS, namespace))
        reading.version = "1"
        async with session() as opened:
            with pytest.raises(ExpiredError):
                async for _ in aio.watch_once(opened, host, reading):
                    pass
        await asyncio.sleep(CLOSE_SECONDS)

    asyncio.run(scenario())


def test_aio_a_bookmark_moves_the_version_past_changes_the_query_never_sees(
    control_plane: ControlPlane, kube_client: k8s.ApiClient, namespace: str
) -> None:
    """A pod made in another namespace during the watch: no change for this query, but the API
    server's bookmark (it sends one 2 s before the stream's end, once its watch cache has seen
    an event) carries its version, so that a watch opened again starts past it. The versions
    compared as numbers: this API server's are etcd revisions."""
    core = k8s.CoreV1Api(kube_client)
    session, host = _aio(control_plane)

    async def scenario() -> tuple[list[Change], Reading, str]:
        reading = Reading(Query(PODS, namespace, timeout_seconds=5))
        async with session() as opened:
            async for _ in aio.list_pages(opened, host, reading):
                pass
            listed = reading.version
            made = asyncio.create_task(asyncio.to_thread(
                core.create_namespaced_pod, "default", _pod(f"during-{namespace}")))  # fmt: skip
            changes = [change async for change in aio.watch_once(opened, host, reading)]
            later = (await made).metadata.resource_version
        await asyncio.sleep(CLOSE_SECONDS)
        assert int(listed) < int(later)
        return changes, reading, later

    try:
        changes, reading, later = asyncio.run(scenario())
    finally:
        core.delete_namespaced_pod(f"during-{namespace}", "default", grace_period_seconds=0)
    assert changes == [], "nothing happened in the watched namespace"
    assert int(reading.version) >= int(later), "the bookmark carried the version forward"


def _refused(control_plane: ControlPlane) -> kube.Configuration:
    """Credentials the API server refuses (401): a token it never issued, no client certificate."""
    configuration = load_configuration(control_plane.kubeconfig)
    configuration.api_key = {"BearerToken": "Bearer not-a-token"}
    configuration.cert_file = configuration.key_file = None
    return configuration


def test_aio_a_refused_list_is_an_error_with_the_api_servers_words(
    control_plane: ControlPlane,
) -> None:
    configuration = _refused(control_plane)

    async def scenario() -> None:
        try:
            async with kube.aiohttp_session(configuration, limit=1) as opened:
                async for _ in aio.list_pages(opened, configuration.host, Reading(Query(PODS))):
                    pass
        finally:
            await asyncio.sleep(CLOSE_SECONDS)

    with pytest.raises(WatchError, match="401: Unauthorized"):
        asyncio.run(scenario())


def test_sync_reads_every_page_then_the_changes_until_stopped(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    _create_jobs(kube_client, namespace, "a", "b", "c")
    stop = threading.Event()
    seen: list[Change] = []
    for change in sync.follow(kube_client, Query(JOBS, namespace, page=2), stop=stop):
        seen.append(change)
        if change.kind == "SYNCED":
            _create_jobs(kube_client, namespace, "d")
        if change.kind == "ADDED":
            stop.set()
    assert sorted(_names(seen, "LISTED")) == ["a", "b", "c"], "two pages"
    assert _names(seen, "ADDED") == ["d"]


def test_sync_watches_from_a_version_given_and_relists_on_410(
    kube_client: k8s.ApiClient, namespace: str
) -> None:
    """`since` too old for the API server: a fresh list, not an error."""
    _create_jobs(kube_client, namespace, "a")
    stop = threading.Event()
    seen: list[Change] = []
    for change in sync.follow(
        kube_client, Query(JOBS, namespace), stop=stop, since="1", retry=False
    ):
        seen.append(change)
        if change.kind == "SYNCED":
            stop.set()
    seen_as = [(c.kind, c.thing.get("metadata", {}).get("name")) for c in seen]
    assert seen_as == [("LISTED", "a"), ("SYNCED", None)]


def test_sync_a_refusal_without_retry_is_raised_with_its_status(
    control_plane: ControlPlane,
) -> None:
    configuration = _refused(control_plane)
    with k8s.ApiClient(configuration) as refused, pytest.raises(WatchError) as raised:
        next(iter(sync.follow(refused, Query(JOBS), retry=False)))
    assert raised.value.status == 401
