"""kopf connects with the operator's own token, however the kubernetes client stored it.

Found on kind: in a pod the client keeps the service account's token as
api_key["BearerToken"] = "bearer <token>", the operator looked for api_key["authorization"], and
kopf watched as system:anonymous (403 on /api), so no job was ever reconciled in a cluster.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest
import urllib3
from kubernetes import client as k8s

from phalanx.operator.cluster import kube


@pytest.mark.parametrize(
    ("api_key", "expected"),
    [
        ({"BearerToken": "bearer in-cluster-token"}, "in-cluster-token"),  # load_incluster_config
        ({"BearerToken": "Bearer kubeconfig-token"}, "kubeconfig-token"),  # load_kube_config
        ({"authorization": "Bearer old-client-token"}, "old-client-token"),
        ({}, None),  # client certificates only
    ],
)
def test_the_bearer_token_is_found_where_the_client_keeps_it(
    api_key: dict[str, str], expected: str | None
) -> None:
    configuration = k8s.Configuration()
    configuration.api_key = api_key
    info = kube.connection_info(configuration)
    assert info.token == expected
    assert info.scheme == ("Bearer" if expected else None)


def test_a_rotated_token_is_read_again_when_kopf_logs_in_again(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    configuration = k8s.Configuration()

    def refresh(config: k8s.Configuration) -> None:  # what load_incluster_config installs
        config.api_key = {"BearerToken": "bearer " + token_file.read_text()}

    configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]
    assert kube.connection_info(configuration).token == "first"
    token_file.write_text("second")
    assert kube.connection_info(configuration).token == "second"


def _session(namespaces: list[str]) -> tuple[int, str | None]:
    """The connection bound and the Authorization header of kopf's session, closed after."""

    async def made() -> tuple[int, str | None]:
        configuration = k8s.Configuration(host="https://127.0.0.1:6443")
        configuration.api_key = {"BearerToken": "Bearer the-token"}
        context = kube.kopf_session(configuration, namespaces)
        session = context.aiohttp_session
        try:
            assert context.server == "https://127.0.0.1:6443"
            return session.connector.limit if session.connector else -1, session.headers.get(
                "Authorization"
            )
        finally:
            await session.close()

    return asyncio.run(made())


def test_kopfs_connections_are_bounded_with_room_for_every_watch() -> None:
    """kopf's own session opens a connection per request in flight, without bound: 300 new
    jobs' finalizer patches held 612 TLS connections of 128 KiB each (tracemalloc)."""
    limit, authorization = _session(["team-a", "team-b"])
    assert authorization == "Bearer the-token"
    assert limit == kube.watch_streams(["team-a", "team-b"]) + kube.KOPF_REQUEST_CONNECTIONS
    assert kube.watch_streams(["team-a", "team-b"]) >= 3 + 2 * 2  # every stream, each namespace
    assert _session([])[0] < limit  # cluster-wide: one stream per kind


def test_a_namespace_pattern_leaves_kopfs_connections_unbounded() -> None:
    """A glob may match any number of namespaces, each with its own watch streams: a bound
    could leave a watch without a connection, so none is set."""
    assert _session(["team-*"])[0] == 0


def test_the_executors_pool_holds_a_connection_per_thread() -> None:
    configuration = k8s.Configuration()
    client = kube.api_client(configuration, threads=64)
    try:
        assert client.rest_client.pool_manager.connection_pool_kw["maxsize"] == 64
    finally:
        client.close()  # type: ignore[no-untyped-call]


def test_the_executors_client_counts_each_threads_time_waiting_for_answers() -> None:
    """A reconcile reports the API server's time apart from its own: the client counts, per
    thread, how long its requests took (here, refused at once by a closed port)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    configuration = k8s.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    client = kube.api_client(configuration, threads=2)
    try:
        with pytest.raises(urllib3.exceptions.HTTPError):
            client.call_api("GET", f"http://127.0.0.1:{port}/api")
        here = client.spent()
        elsewhere: list[float] = []
        thread = threading.Thread(target=lambda: elsewhere.append(client.spent()))
        thread.start()
        thread.join()
        assert here > 0
        assert elsewhere == [0.0]
    finally:
        client.close()  # type: ignore[no-untyped-call]
