"""The list-and-watch's protocol (`phalanx.listwatch.protocol`): what a page and an event mean,
whatever carries them. On a real API server: tests/integration/test_listwatch.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from phalanx.listwatch.protocol import (
    Change,
    ExpiredError,
    Lines,
    Query,
    Reading,
    Resource,
    WatchError,
    answer,
    retry_wait,
)

PODS = Resource("/api/v1", "pods")


def _pod(name: str, version: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def _line(kind: str, thing: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": thing}).encode()


def test_a_list_is_read_page_by_page_and_ends_with_every_object_it_showed() -> None:
    reading = Reading(Query(PODS, "ns", label_selector="phalanx.dev/job", page=2))
    assert reading.query.list_params(None) == {"labelSelector": "phalanx.dev/job", "limit": "2"}
    first, token = reading.page({"items": [_pod("a"), _pod("b")], "metadata": {"continue": "t1"}})
    assert token == "t1"
    assert [c.kind for c in first] == ["LISTED", "LISTED"]
    assert reading.version == "", "a list's version is the last page's"
    assert reading.query.list_params(token)["continue"] == "t1"
    last, token = reading.page({"items": [_pod("c")], "metadata": {"resourceVersion": "30"}})
    assert token is None
    assert last[-1] == Change("SYNCED", seen=frozenset({("ns", "a"), ("ns", "b"), ("ns", "c")}))
    assert reading.version == "30"
    again, _ = reading.page({"items": [], "metadata": {"resourceVersion": "31"}})
    assert again == [Change("SYNCED", seen=frozenset())], "the next list starts from nothing"


def test_a_list_broken_off_leaves_nothing_for_the_next() -> None:
    reading = Reading(Query(PODS))
    reading.page({"items": [_pod("a")], "metadata": {"continue": "t1"}})
    reading.restart_list()
    changes, _ = reading.page({"items": [_pod("b")], "metadata": {"resourceVersion": "5"}})
    assert changes[-1].seen == {("ns", "b")}


def test_watch_events_move_the_version_and_a_bookmark_touches_nothing() -> None:
    reading = Reading(Query(PODS, "ns"))
    params = reading.query.watch_params("12")
    assert params["resourceVersion"] == "12"
    assert (params["watch"], params["allowWatchBookmarks"]) == ("true", "true")
    change = reading.event(_line("MODIFIED", _pod("a", version="13")))
    assert change is not None
    assert (change.kind, change.thing["metadata"]["name"]) == ("MODIFIED", "a")
    assert reading.event(_line("BOOKMARK", {"metadata": {"resourceVersion": "42"}})) is None
    assert reading.version == "42"


def test_an_expired_version_asks_for_a_fresh_list_and_other_errors_are_errors() -> None:
    reading = Reading(Query(PODS))
    with pytest.raises(ExpiredError):
        reading.event(_line("ERROR", {"code": 410, "message": "too old resource version"}))
    with pytest.raises(WatchError, match="internal") as raised:
        reading.event(_line("ERROR", {"code": 500, "message": "internal"}))
    assert raised.value.status == 500
    with pytest.raises(ExpiredError):
        answer(410, "Gone", b"{}")
    with pytest.raises(WatchError, match="403: pods is forbidden"):
        answer(403, "Forbidden", b'{"message": "pods is forbidden"}')


def test_lines_longer_than_a_chunk_are_joined_and_the_last_kept() -> None:
    lines = Lines()
    long = b"x" * 300_000
    assert lines.feed(long[:100]) == []
    assert lines.feed(long[100:] + b"\n{") == [long]
    assert lines.feed(b"}\n\n") == [b"{}"]
    assert lines.feed(b"tail") == []
    assert lines.end() == [b"tail"]


def test_paths_and_selectors() -> None:
    assert Query(PODS).path == "/api/v1/pods"
    jobs = Resource("/apis/phalanx.dev/v1alpha1", "trainingjobs")
    query = Query(jobs, "team", field_selector="metadata.name=j")
    assert query.path == "/apis/phalanx.dev/v1alpha1/namespaces/team/trainingjobs"
    assert query.list_params(None)["fieldSelector"] == "metadata.name=j"


def test_retries_wait_longer_up_to_a_bound() -> None:
    assert [retry_wait(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 5.0, 5.0, 5.0]
