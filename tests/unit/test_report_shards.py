"""Agents' reports sharded over Leases by rank (`phalanx.models.report_shards`): which Lease a
pod writes, which Leases and Role names a job gets, and how the operator reads them together."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from harness.jobs import job_model
from phalanx.models import TrainingJob, labels, names
from phalanx.models.report_shards import (
    OWN_LEASES,
    REPORTS_PER_LEASE,
    SHARED_RANKS,
    report_lease,
    shard,
    shards_for,
)
from phalanx.operator import builder, observe

N, S, OWN = REPORTS_PER_LEASE, SHARED_RANKS, OWN_LEASES
PAST_OWN = OWN - S + 1
"""The first shard of the blocks past `OWN_LEASES`."""


@pytest.mark.parametrize(
    ("pod", "expected"),
    [("llm-3-0", 0), (f"llm-3-{S - 1}", 0), (f"llm-3-{S}", 1), (f"llm-3-{S + 5}", 6),
     (f"llm-3-{OWN - 1}", PAST_OWN - 1), (f"llm-3-{OWN}", PAST_OWN),
     (f"llm-3-{OWN + N - 1}", PAST_OWN), (f"llm-7-{OWN + 20 * N + 3}", PAST_OWN + 20),
     ("llm-2-s1", 0), (f"llm-2-s{S + 2}", 3), ("odd-name", 0)],
)  # fmt: skip
def test_a_pods_shard_is_shared_then_its_own_then_by_blocks_of_ranks(
    pod: str, expected: int
) -> None:
    assert shard(pod) == expected


def test_shard_zero_is_the_heartbeat_lease() -> None:
    assert report_lease("llm-heartbeat", "llm-0-1") == "llm-heartbeat"
    assert report_lease("llm-heartbeat", "llm-0-s0") == "llm-heartbeat"
    assert report_lease("llm-heartbeat", f"llm-0-{S + 11}") == "llm-heartbeat-12"


def test_shards_cover_every_rank_and_every_named_pod() -> None:
    assert shards_for(0) == 1
    assert shards_for(S) == 1
    assert shards_for(S + 1) == 2
    assert shards_for(OWN) == PAST_OWN
    assert shards_for(OWN + 1) == PAST_OWN + 1
    assert shards_for(OWN + N) == PAST_OWN + 1
    assert shards_for(OWN + N + 1) == PAST_OWN + 2
    assert shards_for(1, [f"llm-0-{S + 3}"]) == 5, "a pod made before the job shrank"


def job(max_nodes: int, spares: int = 0, status: dict[str, Any] | None = None) -> TrainingJob:
    replicas = {"min": 1, "max": max_nodes}
    return job_model("llm", metadata={"uid": "u"}, replicas=replicas, spares=spares, status=status)


def granted(manifest: dict[str, Any]) -> list[str]:
    rule = next(r for r in manifest["rules"] if "patch" in r["verbs"])
    return list(rule["resourceNames"])


def test_a_small_job_has_only_its_heartbeat_lease() -> None:
    assert builder.report_leases(job(S)) == []
    assert granted(builder.role(job(S))) == ["llm-heartbeat"]


def test_a_larger_job_gets_a_lease_per_further_rank_and_its_pods_may_write_them() -> None:
    large = job(S + 2, spares=1)
    leases = [m["metadata"]["name"] for m in builder.report_leases(large)]
    assert leases == ["llm-heartbeat-1", "llm-heartbeat-2"]
    assert granted(builder.role(large)) == ["llm-heartbeat", *leases]
    owner = builder.report_leases(large)[0]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "u", "deleted with the job"


def test_spares_past_the_ranks_get_their_shards() -> None:
    assert len(builder.report_leases(job(1, spares=S + 1))) == 1


def test_pods_named_in_status_keep_their_shard_after_the_job_shrank() -> None:
    shrunk = job(1, status={"current": {"ranks": {f"llm-0-{S + 2}": 0}}})
    assert granted(builder.role(shrunk))[-1] == "llm-heartbeat-3"


def lease(name: str, reports: dict[str, int], beat: int | None = None) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    annotations = {
        labels.AGENT_REPORT_PREFIX + pod: json.dumps(
            {"pod": pod, "state": "running", "epoch": epoch, "time": now}
        )
        for pod, epoch in reports.items()
    }
    spec: dict[str, Any] = {}
    if beat is not None:
        annotations[labels.HEARTBEAT] = json.dumps({"epoch": 1, "step": beat})
        spec["renewTime"] = now
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec}


def test_the_operator_reads_a_jobs_leases_together() -> None:
    facts = [
        observe.lease_facts(lease("llm-heartbeat-1", {f"llm-1-{N}": 1, f"llm-1-{N + 1}": 1})),
        observe.lease_facts(lease("llm-heartbeat", {"llm-1-0": 1}, beat=7)),
    ]
    merged = observe.merged(f for f in facts if f is not None)
    assert merged is not None
    assert sorted(merged.reports) == sorted(["llm-1-0", f"llm-1-{N}", f"llm-1-{N + 1}"])
    assert merged.heartbeat is not None
    assert merged.heartbeat.step == 7
    assert merged.renewed is not None
    only_shard = observe.merged(f for f in facts[:1] if f is not None)
    assert only_shard is not None
    assert only_shard.heartbeat is None
    assert observe.merged([]) is None


def test_an_unchanged_report_is_parsed_once() -> None:
    body = lease("llm-heartbeat-1", {"llm-1-100": 1, "llm-1-101": 1})
    first, again = observe.lease_facts(body), observe.lease_facts(body)
    assert first is not None
    assert again is not None
    assert first.reports["llm-1-100"] is again.reports["llm-1-100"]


def test_the_last_shard_of_the_longest_name_is_a_valid_name() -> None:
    replicas = {"min": 1, "max": names.MAX_NODES}
    name = "a" * names.MAX_NAME_LENGTH
    longest = job_model(name, namespace="n", metadata={"uid": "u"}, replicas=replicas)
    last = builder.report_leases(longest)[-1]["metadata"]["name"]
    assert last.endswith(f"-heartbeat-{PAST_OWN + (names.MAX_NODES - OWN) // N - 1}")
    assert len(last) <= 253
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", last)
