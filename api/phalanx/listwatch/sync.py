"""The list-and-watch (`protocol`) over the kubernetes client, for the components that run it on a
thread of their own: the API service's job cache and job control's stream of one job.

Carried by the generated custom-objects calls with `_preload_content=False` (as the client's own
`watch` module does), so the client's credentials, proxies and token refresh all apply; the
stream is read a chunk at a time.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.listwatch.protocol import (
    READ_SLACK_SECONDS,
    Change,
    ExpiredError,
    Lines,
    Query,
    Reading,
    answer,
    retry_wait,
)

log = logging.getLogger(__name__)
CONNECT_SECONDS = 10.0
"""How long opening a connection to the API server may take."""
LIST_SECONDS = 60.0
"""How long one page of a list may take to come."""
_CUSTOM_API = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)$")


def follow(
    api: k8s.ApiClient,
    query: Query,
    stop: threading.Event | None = None,
    retry: bool = True,
    since: str | None = None,
) -> Iterator[Change]:
    """Every change of `query`'s objects (a custom resource's), until `stop` is set: a list,
    then the watch from its version, opened again when the API server ends it; a fresh list on
    410. `since`: watch from this version at first, without a list (the caller has read the
    objects). `retry`: after any other error, list again after a wait (logged); without it the
    error is raised (WatchError, with the API server's status and words)."""
    stop = stop or threading.Event()
    reading = Reading(query)
    reading.version = since or ""
    failures = 0
    while not stop.is_set():
        try:
            if not reading.version:
                yield from _list(api, reading)
                failures = 0
            while not stop.is_set():
                yield from _watch(api, reading, stop)
        except ExpiredError:
            log.info("the %s watch expired; listing again", query.resource.plural)
        except Exception as error:
            if not retry:
                raise
            failures += 1
            wait = retry_wait(failures)
            plural = query.resource.plural
            log.warning("the %s watch failed (%r); listing again in %.1f s", plural, error, wait)
            stop.wait(wait)
        reading.version = ""
        reading.restart_list()


def _list(api: k8s.ApiClient, reading: Reading) -> Iterator[Change]:
    """A fresh list, a page at a time."""
    token: str | None = None
    while True:
        response = _get(api, reading.query, reading.query.list_params(token), read=LIST_SECONDS)
        try:
            page = answer(int(response.status), str(response.reason), response.data)
        finally:
            response.release_conn()
        changes, token = reading.page(page)
        yield from changes
        if token is None:
            return


def _watch(api: k8s.ApiClient, reading: Reading, stop: threading.Event) -> Iterator[Change]:
    """One watch stream from the reading's version until the API server ends it (or `stop`)."""
    params = reading.query.watch_params(reading.version)
    response = _get(
        api, reading.query, params, read=reading.query.timeout_seconds + READ_SLACK_SECONDS
    )
    try:
        if response.status != 200:
            answer(int(response.status), str(response.reason), response.data)
        lines = Lines()
        for chunk in response.stream(amt=None, decode_content=False):
            for line in lines.feed(chunk):
                change = reading.event(line)
                if change is not None:
                    yield change
            if stop.is_set():
                return
        for line in lines.end():
            change = reading.event(line)
            if change is not None:
                yield change
    finally:
        response.close()
        response.release_conn()


def _get(api: k8s.ApiClient, query: Query, params: dict[str, str], read: float) -> Any:
    """The GET of `params` on the query's collection, its answer unread."""
    found = _CUSTOM_API.match(query.resource.api)
    if found is None:
        raise ValueError(f"not a custom resource's API path: {query.resource.api}")
    custom = k8s.CustomObjectsApi(api)
    group, version, plural = found["group"], found["version"], query.resource.plural
    keywords = _keywords(params)
    keywords.update(_preload_content=False, _request_timeout=(CONNECT_SECONDS, read))
    try:
        if query.namespace:
            return custom.list_namespaced_custom_object(
                group, version, query.namespace, plural, **keywords
            )
        return custom.list_cluster_custom_object(group, version, plural, **keywords)
    except ApiException as error:  # a client that raises on a refusal before it is read
        body = error.body if isinstance(error.body, bytes) else str(error.body or "").encode()
        answer(int(error.status or 0), str(error.reason), body)
        raise


_INTEGERS = {"limit", "timeoutSeconds"}
_FLAGS = {"watch", "allowWatchBookmarks"}


def _keywords(params: dict[str, str]) -> dict[str, Any]:
    """The query's parameters as the generated client's keywords (`_continue` for `continue`),
    typed as it checks them."""
    keywords: dict[str, Any] = {}
    for name, value in params.items():
        typed: Any = (
            int(value) if name in _INTEGERS else value == "true" if name in _FLAGS else value
        )
        keywords["_continue" if name == "continue" else _snake(name)] = typed
    return keywords


def _snake(name: str) -> str:
    """A query parameter's name as the generated client spells its keyword."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
