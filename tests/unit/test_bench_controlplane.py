"""The control-plane benchmark's arithmetic on inputs whose answers are known by hand.

Covers: histogram_quantile interpolates inside the bucket as Prometheus does; the buckets between
two scrapes are their difference; the storm picks the fewest nodes (in name order) that hit the
asked number of jobs, counting only Running pods; a hit job is back when first seen Running at a
later epoch (a status at its old epoch, or a later one not Running, does not count); a hit job's
storm marks are its new epoch seen, its last replacement created and Running, and it Running
again, each after the storm (a job with no new pod: its pod marks are its decision); the audit log gives the operator's requests in
a time window, by verb and resource, a watch counted once, and the API server's time for those
that end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.common.tally import PodSeen, Tally
from bench.controlplane.audit import AUDIT_USER, requests_between
from bench.controlplane.controlplane import difference, histogram_quantile
from bench.controlplane.storm import marks, storm_nodes

INF = float("inf")


def test_histogram_quantile_interpolates_within_the_bucket() -> None:
    buckets = [(0.1, 50.0), (1.0, 90.0), (10.0, 100.0), (INF, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.1 + 0.9 * 20 / 40)
    assert histogram_quantile(0.99, buckets) == pytest.approx(1.0 + 9.0 * 9 / 10)
    assert histogram_quantile(0.5, []) == 0.0


def test_the_buckets_between_two_scrapes() -> None:
    before = [(0.1, 5.0), (1.0, 8.0), (INF, 8.0)]
    after = [(0.1, 6.0), (1.0, 12.0), (INF, 13.0)]
    assert difference(after, before) == [(0.1, 1.0), (1.0, 4.0), (INF, 5.0)]


def test_the_storm_takes_the_fewest_nodes_that_hit_enough_jobs() -> None:
    tally = Tally()
    placed = {"a": ("n1", "Running"), "b": ("n1", "Running"), "c": ("n2", "Running"),
              "d": ("n3", "Pending"), "e": ("n3", "Running")}  # fmt: skip
    for job, (node, phase) in placed.items():
        tally.pods[f"{job}-0"] = PodSeen(job=job, node=node, phase=phase, deleting=False)
    assert storm_nodes(tally, 2) == (["n1"], {"a", "b"})
    assert storm_nodes(tally, 3) == (["n1", "n2"], {"a", "b", "c"})
    assert storm_nodes(tally, 5) == (["n1", "n2", "n3"], {"a", "b", "c", "e"})  # d is not Running


def test_a_hit_job_is_back_when_running_at_a_later_epoch() -> None:
    tally = Tally()

    def seen(epoch: int, phase: str) -> None:
        job = {"metadata": {"name": "a"}, "status": {"phase": phase, "epoch": epoch}}
        tally.on_job("MODIFIED", job)

    seen(1, "Running")
    seen(2, "Restarting")
    assert tally.running_again("a", after=1) is None
    seen(2, "Running")
    first = tally.running_again("a", after=1)
    seen(2, "Running")
    assert first is not None
    assert tally.running_again("a", after=1) == first  # the first time it was seen, kept
    assert tally.running_again("a", after=2) is None


def _event(user: str, verb: str, stage: str, received: str, done: str, resource: str | None) -> str:
    ref = {"resource": resource} if resource else None
    return json.dumps({"user": {"username": user}, "verb": verb, "stage": stage,
                       "requestReceivedTimestamp": received, "stageTimestamp": done,
                       "objectRef": ref, "requestURI": "/api"})  # fmt: skip


def test_the_operators_requests_in_a_window(tmp_path: Path) -> None:
    t = "2026-01-01T00:00:{:02d}.{:06d}Z".format
    lines = [
        _event(AUDIT_USER, "create", "ResponseComplete", t(1, 0), t(1, 10_000), "pods"),
        _event(AUDIT_USER, "create", "ResponseComplete", t(2, 0), t(2, 30_000), "pods"),
        _event(AUDIT_USER, "watch", "ResponseStarted", t(2, 0), t(2, 1_000), "pods"),
        _event(AUDIT_USER, "watch", "ResponseComplete", t(2, 0), t(9, 0), "pods"),
        _event(AUDIT_USER, "get", "ResponseComplete", t(3, 0), t(3, 20_000), None),
        _event("someone-else", "create", "ResponseComplete", t(3, 0), t(3, 1_000), "pods"),
        _event(AUDIT_USER, "create", "ResponseComplete", t(9, 0), t(9, 1_000), "pods"),
    ]
    (tmp_path / "audit.log").write_text("\n".join(lines) + "\n")
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    seen = requests_between(tmp_path, start + 1, start + 5)
    assert seen["by_verb"] == {"create pods": 2, "watch pods": 1, "get /api": 1}
    assert seen["requests"] == 4
    assert seen["p50"] == pytest.approx(0.020, abs=1e-6)  # of 10, 20 and 30 ms: the watch is not
    assert seen["p99"] == pytest.approx(0.030, abs=1e-6)


def test_a_hit_job_s_storm_marks_are_its_decision_its_new_pods_and_it_running_again() -> None:
    tally = Tally()

    def job(epoch: int, phase: str, at: float) -> None:
        tally.on_job("MODIFIED", {"metadata": {"name": "a"},
                                  "status": {"phase": phase, "epoch": epoch}})  # fmt: skip
        tally.epoch_at[("a", epoch)] = min(tally.epoch_at[("a", epoch)], at)
        if phase == "Running":
            tally.running_at[("a", epoch)] = at

    job(1, "Running", 5.0)
    tally.pods["a-1-0"] = PodSeen(job="a", node="n1", phase="Running", deleting=False)
    tally.created["a-1-0"], tally.running["a-1-0"] = 6.0, 7.0  # before the storm: not new
    job(2, "Restarting", 12.0)
    assert marks(tally, "a", 1, since=10.0) is None  # not Running again yet
    for pod, created, running in (("a-2-1", 13.0, 15.0), ("a-2-2", 14.0, 16.5)):
        tally.pods[pod] = PodSeen(job="a", node="n2", phase="Running", deleting=False)
        tally.created[pod], tally.running[pod] = created, running
    job(2, "Running", 18.0)
    assert marks(tally, "a", 1, since=10.0) == {
        "decided": 2.0,
        "pods_created": 4.0,
        "pods_running": 6.5,
        "running_again": 8.0,
    }

    spared = Tally()  # every lost pod had a stand-in: no new pod, the pod marks are the decision
    spared.on_job(
        "MODIFIED", {"metadata": {"name": "b"}, "status": {"phase": "Running", "epoch": 2}}
    )
    spared.epoch_at[("b", 2)], spared.running_at[("b", 2)] = 11.0, 13.0
    assert marks(spared, "b", 1, since=10.0) == {
        "decided": 1.0,
        "pods_created": 1.0,
        "pods_running": 1.0,
        "running_again": 3.0,
    }
