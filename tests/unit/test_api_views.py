"""The API's list semantics, without a server: label selectors, phase filter, and pages whose
continue tokens walk every job exactly once."""

from __future__ import annotations

from typing import Any

import pytest

from harness.jobs import job_manifest
from phalanx.control import views
from phalanx.control.errors import BadRequestError


def job(namespace: str, name: str, phase: str | None = None, **labels: str) -> dict[str, Any]:
    status = {"phase": phase} if phase else {}
    return job_manifest(name, namespace=namespace, metadata={"labels": labels}, status=status)


JOBS = [
    job("a", f"j{i:02}", "Running" if i % 2 else "Pending", team=f"t{i % 3}") for i in range(25)
]


@pytest.mark.parametrize(
    ("selector", "count"),
    [("", 25), ("team=t0", 9), ("team!=t0", 16), ("team", 25), ("!team", 0), ("team==t1", 8)],
)
def test_label_selectors(selector: str, count: int) -> None:
    terms = views.parse_selector(selector)
    assert sum(views.matches(j, None, terms) for j in JOBS) == count


def test_phase_filter_and_bad_selector() -> None:
    assert sum(views.matches(j, "Running", []) for j in JOBS) == 12
    with pytest.raises(BadRequestError, match="labelSelector"):
        views.parse_selector("a b=c")


@pytest.mark.parametrize("limit", [1, 7, 25, 100])
def test_pages_cover_every_job_once(limit: int) -> None:
    seen: list[str] = []
    token = None
    while True:
        page = views.page(JOBS, limit, token)
        seen += [item.name for item in page.items]
        assert page.remaining == len(JOBS) - len(seen)
        token = page.continue_
        if token is None:
            break
    assert seen == [j["metadata"]["name"] for j in JOBS]


def test_a_forged_continue_token_is_refused() -> None:
    with pytest.raises(BadRequestError, match="continue"):
        views.page(JOBS, 5, "%%%")
