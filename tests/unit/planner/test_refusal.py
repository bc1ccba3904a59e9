"""Configuration errors the API server finds after the job was admitted.

Covers: a child refused as Invalid becomes a ConfigurationError condition and one Warning event
with the API server's words; nothing is created again for that spec, across reconciles and from
the status alone (a restarted operator); a new spec generation clears it and tries again; a
report about an older spec is ignored; a refused standby pod does not stop a running gang from
being watched.
"""

from __future__ import annotations

from dataclasses import replace

from phalanx.models import TrainingJob
from phalanx.operator.planner import (
    ChildRefusal,
    CreateNodePod,
    CreateStandbyPod,
    EnsureChildren,
    Observed,
    PatchStatus,
    Plan,
)
from tests.unit.planner.builders import at, job, pods, step

API_WORDS = (
    'Pod "j-1-0" is invalid: spec.containers[0].ports[0].name: Invalid value: "Bad_Port": '
    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
)


def refusal(generation: int = 1, kind: str = "Pod", name: str = "j-1-0") -> ChildRefusal:
    return ChildRefusal(kind=kind, name=name, message=API_WORDS, generation=generation)


def creations(plan: Plan) -> list[object]:
    kinds = (EnsureChildren, CreateNodePod, CreateStandbyPod)
    return [a for a in plan.actions if isinstance(a, kinds)]


def warnings(plan: Plan) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in plan.events if e.type == "Warning"]


def condition(j: TrainingJob, kind: str = "ConfigurationError") -> tuple[str, str, str] | None:
    assert j.status is not None
    found = next((c for c in j.status.conditions if c.type == kind), None)
    return (found.status, found.reason, found.message) if found else None


def with_generation(j: TrainingJob, generation: int, **spec: object) -> TrainingJob:
    """The job after the user edited its spec."""
    meta = j.metadata.model_copy(update={"generation": generation})
    new_spec = j.spec.model_copy(update=spec)
    return j.model_copy(update={"metadata": meta, "spec": new_spec})


def refused_at_launch() -> tuple[TrainingJob, Plan]:
    """Epoch 1 decided and its first pod refused; the next plan is told."""
    j, first = step(job(), Observed(), at(0))
    assert creations(first)
    return step(j, Observed(refused=refusal()), at(1))


def test_refused_child_is_a_configuration_error_with_the_api_servers_words() -> None:
    j, plan = refused_at_launch()
    expected = f"the API server refused Pod j-1-0: {API_WORDS}"
    assert condition(j) == ("True", "RefusedByAPIServer", expected)
    assert warnings(plan) == [("ConfigurationError", expected)]
    assert creations(plan) == []
    assert j.status is not None
    assert j.status.phase == "Pending"
    assert j.status.restarts.total == 0
    failure = j.status.failures[-1]
    assert (failure.failure_class, failure.reason, failure.pod) == (
        "configuration",
        "RefusedByAPIServer",
        "j-1-0",
    )


def test_same_spec_is_not_tried_again_nor_reported_twice() -> None:
    j, _ = refused_at_launch()
    j, plan = step(j, Observed(refused=refusal()), at(2))  # reported again: no second event
    assert warnings(plan) == []
    assert creations(plan) == []
    for t in (3, 60, 3600):  # later reconciles, or a restarted operator: only the status knows
        j, plan = step(j, Observed(), at(t))
        assert creations(plan) == []
        assert plan.of_type(PatchStatus) == []
        assert plan.requeue_after is None


def test_spec_change_clears_the_condition_and_tries_again() -> None:
    j, _ = refused_at_launch()
    j = with_generation(j, 2)
    j, plan = step(j, Observed(), at(5))
    assert condition(j) == ("False", "SpecChanged", "")
    assert [(a.epoch, a.rank) for a in plan.of_type(CreateNodePod)] == [(1, r) for r in range(4)]
    assert EnsureChildren(1) in plan.actions


def test_report_about_an_older_spec_is_ignored() -> None:
    j, _ = step(job(), Observed(), at(0))
    j = with_generation(j, 2)
    j, plan = step(j, Observed(refused=refusal(generation=1)), at(1))
    assert condition(j) is None
    assert len(plan.of_type(CreateNodePod)) == 4


def test_other_children_are_named_by_kind() -> None:
    j, _ = step(job(), Observed(), at(0))
    j, plan = step(j, Observed(refused=refusal(kind="Service", name="j")), at(1))
    assert warnings(plan)[0][1].startswith("the API server refused Service j: ")
    assert j.status is not None
    assert j.status.failures[-1].pod is None


def shrunk_to_3() -> TrainingJob:
    """A job that shrank to 3 of its 4 nodes (one did not schedule) and runs epoch 2, so the
    planner wants a standby pod to grow back."""
    j, _ = step(job(failurePolicy={"scheduleTimeoutSeconds": 30}), Observed(), at(0))
    pending = pods(1, 4)
    pending[3] = replace(pending[3], phase="Pending", node_name=None)
    j, _ = step(j, Observed(pods=tuple(pending)), at(10))
    j, _ = step(j, Observed(pods=tuple(pending)), at(31))
    j, _ = step(j, Observed(), at(32))
    j, plan = step(j, Observed(pods=tuple(pods(2, 3))), at(33))
    assert plan.of_type(CreateStandbyPod) == [CreateStandbyPod(2, 0, nodes=4)]
    return j


def test_refused_standby_pod_leaves_a_running_gang_watched() -> None:
    j = shrunk_to_3()
    running = pods(2, 3)
    j, plan = step(j, Observed(pods=tuple(running), refused=refusal(name="j-2-s0")), at(34))
    assert condition(j) == (
        "True",
        "RefusedByAPIServer",
        f"the API server refused Pod j-2-s0: {API_WORDS}",
    )
    assert creations(plan) == []
    j, plan = step(j, Observed(pods=tuple(running)), at(35))  # failures() must not clear it
    assert condition(j) is not None
    assert condition(j)[0] == "True"  # type: ignore[index]
    assert creations(plan) == []
    done = [replace(p, phase="Succeeded", exit_code=0) for p in running]
    j, _ = step(j, Observed(pods=tuple(done)), at(36))
    assert j.status is not None
    assert j.status.phase == "Succeeded"
