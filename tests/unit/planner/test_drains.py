"""Planned disruptions: a node cordoned, drained, tainted NoExecute or labelled unhealthy while a
rank runs there. The job saves and moves the rank itself (a hot spare, or a shrink) before any
eviction: a planned resize, with no failure recorded and no restart budget spent."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.models.conditions import ConditionType
from phalanx.operator import observe
from phalanx.operator.planner import NodeView, Observed, PodView
from phalanx.operator.planner.actions import DeletePods
from tests.unit.planner.builders import at, events, job, launched, pods, step
from tests.unit.planner.inplace_builders import agents, report, running, spare

CORDONED = NodeView("node-2", ready=True, leaving="cordoned")


def saved(gang: list[PodView], moving: int, when: float) -> tuple[PodView, ...]:
    """The gang after the moving pod's SIGTERM: every other rank saved the step and stopped
    (exit 77), the moving pod's container ended."""
    return tuple(
        replace(p, phase="Failed", exit_code=143, deleting=True, stop_deadline=at(50))
        if p.rank == moving
        else replace(p, agent=report(p.name, "failed", 1, exitCode=77, failedAt=at(when)))
        for p in gang
    )


def test_a_cordoned_nodes_rank_saves_then_moves_to_the_spare_with_no_failure() -> None:
    j = running(job(replicas={"min": 2, "max": 3}, spares=1), n=3, extra=(spare(0),))
    gang = agents(1, 3)
    nodes = {"node-2": CORDONED}
    j, plan = step(j, Observed(pods=(*gang, spare(0)), nodes=nodes), at(20))
    assert j.status is not None
    assert plan.of_type(DeletePods) == [DeletePods(("j-1-2",), False, ("j-1-2",))], (
        "graceful, not forced"
    )
    assert events(plan) == [], "one event: when the rank has moved"
    assert j.status.epoch == 1, "the gang saves first"
    resizing = next(c for c in j.status.conditions if c.type == ConditionType.RESIZING)
    assert "node node-2 is cordoned: node rank 2 leaves it (saving first)" in resizing.message
    stopping = replace(gang[2], deleting=True, stop_deadline=at(50))
    j, plan = step(j, Observed(pods=(*gang[:2], stopping, spare(0)), nodes=nodes), at(20.2))
    assert j.status is not None
    assert j.status.epoch == 1, "the workers still run: they are saving the step they reached"
    assert plan.requeue_after == pytest.approx(29.8)
    j, plan = step(j, Observed(pods=(*saved(gang, 2, 20.5), spare(0)), nodes=nodes), at(21))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3), "the spare takes rank 2"
    assert j.status.current.ranks == {"j-1-0": 0, "j-1-1": 1, "j-standby-1-0": 2}
    assert j.status.failures == []
    assert j.status.restarts.total == 0
    resizing = next(c for c in j.status.conditions if c.type == ConditionType.RESIZING)
    assert (resizing.status, resizing.reason) == ("True", "Drain")
    assert events(plan) == ["Drain"]
    assert plan.events[0].message == (
        "node node-2 is cordoned: node rank 2 leaves it: epoch 2 with 3 nodes"
    )


def test_a_moved_pod_gone_before_the_next_look_is_still_a_drain_not_a_failure() -> None:
    """Its container saved and exited within the grace, and the API server removed the pod
    before the operator looked again: status remembers it was moving, so the missing rank is the
    drain's, not a deleted pod's failure."""
    j = running(job(replicas={"min": 2, "max": 3}, spares=1), n=3, extra=(spare(0),))
    gang = agents(1, 3)
    nodes = {"node-2": CORDONED}
    j, _ = step(j, Observed(pods=(*gang, spare(0)), nodes=nodes), at(20))
    assert j.status is not None
    assert list(j.status.current.moving) == ["j-1-2"]
    others = saved(gang, 2, 20.5)[:2]
    j, plan = step(j, Observed(pods=(*others, spare(0)), nodes=nodes), at(21))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 3), "the spare takes rank 2"
    assert j.status.failures == []
    assert j.status.restarts.total == 0
    assert events(plan) == ["Drain"]
    assert j.status.current.moving == {}, "a new epoch moves nothing yet"


def test_peers_still_running_after_the_moved_pod_is_gone_get_a_default_grace() -> None:
    j = running(job(replicas={"min": 2, "max": 3}, spares=1), n=3, extra=(spare(0),))
    gang = agents(1, 3)
    nodes = {"node-2": CORDONED}
    j, _ = step(j, Observed(pods=(*gang, spare(0)), nodes=nodes), at(20))
    j, plan = step(j, Observed(pods=(*gang[:2], spare(0)), nodes=nodes), at(21))
    assert j.status is not None
    assert j.status.epoch == 1, "the peers still run: they may be saving"
    assert plan.requeue_after == pytest.approx(29)
    j, plan = step(j, Observed(pods=(*gang[:2], spare(0)), nodes=nodes), at(50))
    assert j.status is not None
    assert j.status.epoch == 2, "past the grace the move goes on"
    assert events(plan) == ["Drain"]


def test_without_a_spare_the_gang_shrinks_and_at_its_minimum_waits_for_a_node() -> None:
    j = running(job(replicas={"min": 2, "max": 3}), n=3)
    gang = agents(1, 3)
    nodes = {"node-2": CORDONED}
    j, _ = step(j, Observed(pods=tuple(gang), nodes=nodes), at(20))
    j, _ = step(j, Observed(pods=saved(gang, 2, 20.5), nodes=nodes), at(21))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 2)

    at_min = running(job(replicas={"min": 3, "max": 3}), n=3)
    at_min, _ = step(at_min, Observed(pods=tuple(gang), nodes=nodes), at(20))
    at_min, _ = step(at_min, Observed(pods=saved(gang, 2, 20.5), nodes=nodes), at(21))
    assert at_min.status is not None
    assert (at_min.status.epoch, at_min.status.nodes) == (2, 3), "the node goes all the same"
    assert "j-1-2" not in at_min.status.current.ranks
    assert at_min.status.restarts.total == 0


def test_pods_whose_workers_nobody_reports_move_at_once() -> None:
    """Pods that run no agent (a plain command): no report says their workers still save, so
    the move does not wait; the pod got SIGTERM, and the program resumes from what it saved."""
    j = launched(job(replicas={"min": 2, "max": 3}), n=3)
    j, plan = step(j, Observed(pods=tuple(pods(1, 3)), nodes={"node-2": CORDONED}), at(20))
    assert j.status is not None
    assert (j.status.epoch, j.status.nodes) == (2, 2)
    assert j.status.failures == []
    assert DeletePods(("j-1-2",), False) in plan.of_type(DeletePods)


def test_another_failure_during_a_drain_is_the_failure_rules_and_leaves_the_node_too() -> None:
    j = running(job(replicas={"min": 2, "max": 3}), n=3)
    gang = agents(1, 3)
    killed = replace(gang[0], agent=report("j-1-0", "failed", 1, exitCode=137, failedAt=at(20)))
    j, _ = step(j, Observed(pods=(killed, gang[1], gang[2]), nodes={"node-2": CORDONED}), at(20))
    assert j.status is not None
    assert j.status.epoch == 2
    assert [f.reason for f in j.status.failures] == ["Killed"]
    assert "j-1-2" not in j.status.current.ranks, "a pod on a node being taken away never carries"


def test_a_spare_on_a_node_being_taken_away_is_replaced() -> None:
    warm = replace(spare(0, node="node-9"), warm=True)
    j = running(job(replicas={"min": 2, "max": 3}, spares=1), n=3, extra=(warm,))
    _, plan = step(j, Observed(pods=(*agents(1, 3), warm)), at(20))
    assert plan.of_type(DeletePods) == [], "a warm spare on a node that stays, stays"
    nodes = {"node-9": NodeView("node-9", ready=True, leaving="cordoned")}
    _, plan = step(j, Observed(pods=(*agents(1, 3), warm), nodes=nodes), at(20))
    assert plan.of_type(DeletePods) == [DeletePods(("j-standby-1-0",), False, ("j-standby-1-0",))]


def test_a_lost_node_is_not_a_drain() -> None:
    """NotReady: the node controller's own NoExecute taints; the failure rules' case."""
    lost = {
        "metadata": {"name": "node-2"},
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }
    view = observe.node_view(lost)
    assert view.leaving is None
    j = running(job(replicas={"min": 2, "max": 3}), n=3)
    j, _ = step(j, Observed(pods=tuple(agents(1, 3)), nodes={"node-2": view}), at(20))
    assert j.status is not None
    assert j.status.failures[-1].reason == "NodeNotReady"


@pytest.mark.parametrize(
    ("spec", "labels", "leaving"),
    [
        ({"unschedulable": True}, {}, "cordoned"),
        ({"taints": [{"key": "nvidia.com/gpu-xid", "value": "79", "effect": "NoExecute"}]}, {},
         "tainted nvidia.com/gpu-xid=79:NoExecute"),
        ({"taints": [{"key": "example.com/gpu", "effect": "NoSchedule"}]}, {}, None),
        ({}, {"health": "Replace"}, "labelled health=Replace"),
        ({}, {"health": "Schedulable"}, None),
        ({}, {}, None),
    ],
)  # fmt: skip
def test_which_nodes_are_being_taken_away(
    spec: dict[str, object], labels: dict[str, str], leaving: str | None
) -> None:
    node = {
        "metadata": {"name": "n", "labels": labels},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert observe.node_view(node, {"health": frozenset({"Replace"})}).leaving == leaving
