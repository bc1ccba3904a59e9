"""A cluster-wide operator runs no job in its excluded namespaces (kube-system and the other
system namespaces by default): the job fails at once, naming the setting, and gets nothing."""

from __future__ import annotations

from phalanx.models import TrainingJob
from phalanx.operator.planner import CreateNodePod, EnsureChildren, Observed, PlannerConfig
from phalanx.operator.settings import OperatorSettings
from tests.unit.planner.builders import at, job, step


def in_namespace(namespace: str) -> TrainingJob:
    j = job()
    return j.model_copy(update={"metadata": j.metadata.model_copy(update={"namespace": namespace})})


def test_a_job_in_an_excluded_namespace_fails_and_gets_nothing() -> None:
    config = PlannerConfig(excluded_namespaces=frozenset({"kube-system"}))
    j, plan = step(in_namespace("kube-system"), Observed(), at(0), config)
    assert j.status is not None
    assert j.status.phase == "Failed"
    failed = next(c for c in j.status.conditions if c.type == "Failed")
    assert failed.reason == "NamespaceExcluded"
    assert "operator.excludedNamespaces" in failed.message
    assert not [a for a in plan.actions if isinstance(a, EnsureChildren | CreateNodePod)]


def test_other_namespaces_run() -> None:
    config = PlannerConfig(excluded_namespaces=frozenset({"kube-system"}))
    j, plan = step(in_namespace("team-a"), Observed(), at(0), config)
    assert j.status is not None
    assert j.status.phase != "Failed"
    assert [a for a in plan.actions if isinstance(a, EnsureChildren)]


def test_the_system_namespaces_are_excluded_cluster_wide_unless_asked_for() -> None:
    cluster_wide = OperatorSettings().planner_config().excluded_namespaces
    assert cluster_wide == {"kube-system", "kube-public", "kube-node-lease"}
    assert OperatorSettings(excluded_namespaces=[]).planner_config().excluded_namespaces == set()
    asked = OperatorSettings(namespaces=["kube-system", "team-a"]).planner_config()
    assert asked.excluded_namespaces == set(), "a namespace listed to watch is what was asked"
