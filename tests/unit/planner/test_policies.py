"""Each small policy on its own, as tables: classification, backoff and budgets, elastic sizing,
heartbeat reading. Property tests check the sizing invariants over random specs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.models import exits
from phalanx.models.status import Restarts
from phalanx.operator.planner import NodeView, PodView, backoff, elastic, heartbeat
from phalanx.operator.planner.classify import Facts, Verdict, classify, restart_class
from tests.unit.planner.builders import beat, job

RUNNING = PodView(name="p", epoch=1, rank=0, phase="Running", node_name="n1")
FACTS = Facts(
    nodes={"n1": NodeView("n1", True), "n2": NodeView("n2", False)},
    retryable_exit_codes=frozenset({42}),
)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (RUNNING, None),
        (replace(RUNNING, phase="Succeeded", exit_code=0), None),
        (replace(RUNNING, phase="Failed", exit_code=1, terminated_reason="Error"), ("application", "Error")),
        (replace(RUNNING, phase="Failed", exit_code=2), ("application", "Error")),
        (replace(RUNNING, phase="Failed", exit_code=137, terminated_reason="OOMKilled"), ("infrastructure", "OOMKilled")),
        (replace(RUNNING, phase="Failed", pod_reason="Evicted"), ("infrastructure", "Evicted")),
        (replace(RUNNING, disruption_reason="EvictionByEvictionAPI"), ("infrastructure", "EvictionByEvictionAPI")),
        (replace(RUNNING, deleting=True), ("infrastructure", "PodDeleted")),
        (replace(RUNNING, node_name="n2"), ("infrastructure", "NodeNotReady")),
        (replace(RUNNING, phase="Unknown"), ("infrastructure", "NodeLost")),
        (replace(RUNNING, phase="Failed", exit_code=exits.COMMUNICATION), ("infrastructure", "CollectiveFailure")),
        (replace(RUNNING, phase="Failed", exit_code=exits.PREFLIGHT), ("infrastructure", "PreflightFailed")),
        (replace(RUNNING, phase="Failed", exit_code=143), ("infrastructure", "Killed")),
        (replace(RUNNING, phase="Failed", exit_code=42), ("infrastructure", "RetryableExitCode")),
        (replace(RUNNING, phase="Pending", node_name=None, waiting_reason="ImagePullBackOff"), ("configuration", "ImagePullBackOff")),
        (replace(RUNNING, phase="Pending", waiting_reason="CreateContainerConfigError"), ("configuration", "CreateContainerConfigError")),
        (replace(RUNNING, phase="Pending", waiting_reason="ContainerCreating"), None),
    ],
    ids=lambda v: repr(v)[:60],
)  # fmt: skip
def test_classification(pod: PodView, expected: tuple[str, str] | None) -> None:
    verdict = classify(pod, FACTS)
    assert (verdict.failure_class, verdict.reason) == expected if verdict else expected is None


def test_infrastructure_wins_the_restart_class() -> None:
    app = Verdict("application", "Error")
    infra = Verdict("infrastructure", "OOMKilled")
    assert restart_class([app]) == "application"
    assert restart_class([app, infra]) == "infrastructure"


@pytest.mark.parametrize(
    ("failure_class", "consecutive", "delay"),
    [("application", 1, 5), ("application", 2, 10), ("application", 3, 20), ("application", 4, 40),
     ("application", 9, 40), ("infrastructure", 3, 0), ("application", 0, 0)],
)  # fmt: skip
def test_backoff_doubles_up_to_its_cap(failure_class: str, consecutive: int, delay: float) -> None:
    policy = job().spec.failure_policy
    assert backoff.restart_delay(failure_class, consecutive, policy) == delay  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("restarts", "failure_class", "exhausted"),
    [(Restarts(application=2), "application", False), (Restarts(application=3), "application", True),
     (Restarts(application=9, infrastructure=19), "infrastructure", False),
     (Restarts(infrastructure=20), "infrastructure", True)],
)  # fmt: skip
def test_budgets(restarts: Restarts, failure_class: str, exhausted: bool) -> None:
    policy = job().spec.failure_policy  # maxRestarts 3, maxInfraRestarts 20
    assert backoff.budget_exhausted(failure_class, restarts, policy) is exhausted  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "at_most", "size"),
    [
        ({}, 3, 3),
        ({}, 9, 4),
        ({}, 1, None),
        ({"nprocPerNode": 2, "parallelism": {"tensor": 2, "pipeline": 2}}, 3, 2),
        ({"nprocPerNode": 1, "parallelism": {"pipeline": 2}, "replicas": {"min": 2, "max": 6}}, 5, 4),
        ({"replicas": {"min": 2, "max": 4, "desired": 3}}, 4, 3),
    ],
)  # fmt: skip
def test_largest_valid_size(spec: dict[str, object], at_most: int, size: int | None) -> None:
    assert elastic.largest_valid_size(job(**spec).spec, at_most) == size


@st.composite
def specs(draw: st.DrawFn) -> tuple[object, int]:
    tensor = draw(st.sampled_from([1, 2, 4]))
    nproc = tensor * draw(st.integers(1, 2))
    pipeline = draw(st.sampled_from([1, 2, 3]))
    unit = tensor * pipeline
    # smallest node count whose world is a multiple of tensor x pipeline
    step = next(n for n in range(1, unit + 1) if n * nproc % unit == 0)
    lo = step * draw(st.integers(1, 3))
    hi = lo + step * draw(st.integers(0, 3))
    desired = draw(st.integers(lo, hi))
    j = job(
        nprocPerNode=nproc,
        parallelism={"tensor": tensor, "pipeline": pipeline},
        replicas={"min": lo, "max": hi, "desired": desired},
    )
    return j.spec, draw(st.integers(0, hi + 3))


@given(specs())
def test_sizes_stay_in_range_and_keep_dp_integer(case: tuple[object, int]) -> None:
    spec, at_most = case
    size = elastic.largest_valid_size(spec, at_most)  # type: ignore[arg-type]
    target = elastic.target_size(spec)  # type: ignore[arg-type]
    for n in (size, target):
        if n is None:
            continue
        assert spec.replicas.min <= n <= spec.replicas.max  # type: ignore[attr-defined]
        assert n * spec.nproc_per_node % spec.model_parallel_size == 0  # type: ignore[attr-defined]
    if size is not None:
        assert size <= at_most


@pytest.mark.parametrize(
    ("times", "window", "slow"),
    [([1.0, 1.0, 1.1, 3.0], 20, [3]), ([1.0, 1.0, 1.1, 1.9], 20, []), ([1.0, 5.0], 20, [1]),
     ([1.0, 1.0, 1.0, 3.0], 5, []), ([2.0], 20, [])],
)  # fmt: skip
def test_straggler_ranks(times: list[float], window: int, slow: list[int]) -> None:
    hb = beat(1, 10, rank_step_seconds=times, window_steps=window)
    assert heartbeat.straggler_ranks(hb, factor=2.0, min_window=10) == slow


def test_stragglers_are_judged_by_compute_time_when_ranks_report_it() -> None:
    """Synchronous steps take every rank as long as the slowest: the compute times tell."""
    alike = [1.0, 1.0, 1.0, 1.0]
    hb = beat(1, 10, rank_step_seconds=alike, rank_compute_seconds=[0.2, 0.2, 0.9, 0.2],
              window_steps=20)  # fmt: skip
    assert heartbeat.straggler_ranks(hb, factor=2.0, min_window=10) == [2]
    healthy = beat(1, 10, rank_step_seconds=[1.0, 1.0, 1.0, 3.0],
                   rank_compute_seconds=[0.2, 0.25, 0.2, 0.22], window_steps=20)  # fmt: skip
    assert heartbeat.straggler_ranks(healthy, factor=2.0, min_window=10) == []


def test_a_rank_slower_at_work_that_costs_next_to_nothing_is_no_straggler() -> None:
    """A small script's forward pass: 20 us against 8 us is 2.5 x, and 12 us of a 100 ms step
    (scheduling noise does that); found in e2e, where it restarted a healthy job."""
    tiny = beat(1, 10, rank_step_seconds=[0.1] * 4,
                rank_compute_seconds=[8e-6, 20e-6, 8e-6, 9e-6], window_steps=20)  # fmt: skip
    assert heartbeat.straggler_ranks(tiny, factor=2.0, min_window=10) == [1], "no floor: found"
    assert heartbeat.straggler_ranks(tiny, factor=2.0, min_window=10, min_cost=0.1) == []
    costly = beat(1, 10, rank_step_seconds=[0.1] * 4,
                  rank_compute_seconds=[0.02, 0.05, 0.02, 0.02], window_steps=20)  # fmt: skip
    assert heartbeat.straggler_ranks(costly, factor=2.0, min_window=10, min_cost=0.1) == [1]


@pytest.mark.parametrize(
    ("times", "window", "seconds"),
    [([1.0, 2.5, 1.2], 20, 2.5), ([1.0, 2.5], 0, None), ([], 20, None),
     ([0.0, float("nan"), 1.5], 20, 1.5)],
)  # fmt: skip
def test_slowest_step_seconds(times: list[float], window: int, seconds: float | None) -> None:
    hb = beat(1, 10, rank_step_seconds=times, window_steps=window)
    assert heartbeat.slowest_step_seconds(hb) == seconds


@pytest.mark.parametrize(
    ("user", "step_seconds", "seconds", "why"),
    [
        (None, None, 30, "30 s: adaptive floor, no step time yet"),
        (None, 2.1, 30, "30 s: adaptive, 10 x 2.1 s step time, floor 30 s"),
        (None, 4.5, 45, "45 s: adaptive, 10 x 4.5 s step time, floor 30 s"),
        (None, 120.0, 1200, "1200 s: adaptive, 10 x 120 s step time, floor 30 s"),
        (10, None, 10, "10 s: hangTimeoutSeconds"),
        (600, 0.2, 600, "600 s: hangTimeoutSeconds"),
    ],
)
def test_hang_timeout(
    user: int | None, step_seconds: float | None, seconds: float, why: str
) -> None:
    timeout = heartbeat.hang_timeout(user, step_seconds)
    assert (timeout.seconds, timeout.why) == (seconds, why)


def test_hang_timeout_defaults_to_adaptive() -> None:
    assert job().spec.failure_policy.hang_timeout_seconds is None
