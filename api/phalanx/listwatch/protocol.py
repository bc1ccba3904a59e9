"""What a list-and-watch says, apart from how it is carried: the requests to make, what a list's
page and a watch's event mean, and the errors that ask for a fresh list.

It is client-go's reflector, in the form every Phalanx component shares: a list read a page at a
time (a page's objects are let go before the next is read), then a watch from the list's
resourceVersion with bookmarks, opened again from the last version seen when the API server
ends it, and a fresh list when it answers 410 (the version was compacted away). `sync` carries it
over the kubernetes client (the API service, job control), `aio` over aiohttp (the operator).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

LIST_PAGE = 500
"""Objects per page of a list: a large cluster is not one huge answer."""
SERVER_TIMEOUT_SECONDS = 300
"""How long the API server keeps a watch open."""
READ_SLACK_SECONDS = 30
"""A stream silent this much longer than `SERVER_TIMEOUT_SECONDS` (bookmarks come every minute)
is dead: it is opened again."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
"""Waits before listing again after an error, the last repeated."""

ObjectKey = tuple[str, str]
"""An object's namespace and name."""


class ExpiredError(Exception):
    """The watch's resourceVersion is gone from the API server's history (410): list again."""


class WatchError(Exception):
    """The API server refused the list or the watch (`status`, 0 when it sent no answer), or
    sent an error event; `message` in its words."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.message, self.status = message, status


@dataclass(frozen=True)
class Resource:
    """A resource: the API path of its group and version, and its plural."""

    api: str
    plural: str


@dataclass(frozen=True)
class Query:
    """The objects of `resource` in `namespace` (None: every namespace) that the selectors
    match."""

    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    page: int = LIST_PAGE
    timeout_seconds: int = SERVER_TIMEOUT_SECONDS
    """How long the API server keeps one watch stream open."""

    @property
    def path(self) -> str:
        """The collection's path on the API server."""
        plural, api = self.resource.plural, self.resource.api
        return (
            f"{api}/namespaces/{self.namespace}/{plural}" if self.namespace else f"{api}/{plural}"
        )

    def list_params(self, token: str | None) -> dict[str, str]:
        """One page of the list, after the page whose continue `token` is given."""
        params = self._selectors() | {"limit": str(self.page)}
        if token:
            params["continue"] = token
        return params

    def watch_params(self, version: str) -> dict[str, str]:
        """One watch stream from `version`, with bookmarks, ended by the API server after
        `timeout_seconds`."""
        return self._selectors() | {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(self.timeout_seconds),
        }

    def _selectors(self) -> dict[str, str]:
        selectors = {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}
        return {k: v for k, v in selectors.items() if v}


ChangeKind = Literal["LISTED", "SYNCED", "ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class Change:
    """What a follower learns: an object a fresh list showed (LISTED); the end of that list
    (SYNCED: `seen` names every object it showed, so the ones it did not show are gone); or a
    watch event (ADDED, MODIFIED, DELETED) with the object as it is now (as it was last, when
    deleted)."""

    kind: ChangeKind
    thing: Mapping[str, Any] = field(default_factory=dict)
    seen: frozenset[ObjectKey] = frozenset()


def key(thing: Mapping[str, Any]) -> ObjectKey:
    """The object's namespace and name."""
    meta = thing.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


class Reading:
    """One query's place in the stream: the resourceVersion reached, and the objects the list
    under way has shown. Turns pages and events into changes."""

    def __init__(self, query: Query) -> None:
        self.query = query
        self.version = ""
        self._seen: set[ObjectKey] = set()

    def page(self, page: Mapping[str, Any]) -> tuple[list[Change], str | None]:
        """A list page's objects as LISTED changes, and the continue token of the next page;
        the last page (no token) ends with SYNCED and sets the version to the list's."""
        items = page.get("items") or ()
        changes = [Change("LISTED", thing) for thing in items]
        self._seen.update(key(thing) for thing in items)
        meta = page.get("metadata") or {}
        token = meta.get("continue") or None
        if token is None:
            changes.append(Change("SYNCED", seen=frozenset(self._seen)))
            self._seen = set()
            self.version = str(meta.get("resourceVersion") or "")
        return changes, token

    def restart_list(self) -> None:
        """A list broken off (an error): the next one starts from nothing."""
        self._seen = set()

    def event(self, line: bytes) -> Change | None:
        """One line of a watch stream: its change (None for a bookmark, which only moves the
        version). 410 raises ExpiredError, any other error event WatchError."""
        event = json.loads(line)
        kind, thing = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if thing.get("code") == 410:
                raise ExpiredError(thing.get("message"))
            raise WatchError(thing.get("message") or str(thing), int(thing.get("code") or 0))
        version = (thing.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = str(version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            return Change(kind, thing)
        return None


def answer(status: int, reason: str, body: bytes) -> dict[str, Any]:
    """The JSON of a list's answer; a refusal raised in the API server's words (410 as
    ExpiredError)."""
    if status == 410:
        raise ExpiredError(body.decode(errors="replace"))
    if status != 200:
        try:
            message = json.loads(body).get("message") or reason
        except ValueError:
            message = reason
        raise WatchError(str(message), status)
    parsed: dict[str, Any] = json.loads(body)
    return parsed


class Lines:
    """A stream's lines, however long (aiohttp's own line reader stops at 128 KiB, and a pod with
    a large spec, or a Lease with 2 048 agents' reports, can pass that): feed it chunks."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The whole lines `chunk` completes."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [line for line in lines if line.strip()]

    def end(self) -> list[bytes]:
        """The last line, if the stream ended without its newline."""
        rest, self._buffer = self._buffer, b""
        return [rest] if rest.strip() else []


def retry_wait(failures: int) -> float:
    """Seconds to wait before listing again after `failures` errors in a row (at least one)."""
    return RETRY_SECONDS[min(max(failures, 1), len(RETRY_SECONDS)) - 1]
