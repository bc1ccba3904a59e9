"""The executor's order of a plan's actions: an epoch's assignment goes out first (the pods it
carries over start at once), then the plan's other actions in their order, a run of pod
creations as one step."""

from __future__ import annotations

from phalanx.operator.execute import _steps
from phalanx.operator.planner import AssignEpoch, CreateNodePod, DeletePods, EnsureChildren


def test_the_assignment_goes_first_and_pod_creations_run_together() -> None:
    assign = AssignEpoch(2, 2, (("j-1-0", 0), ("j-2-1", 1)))
    delete = DeletePods(("j-1-1",), force=True)
    children = EnsureChildren(2)
    creates = [CreateNodePod(2, 1, 2), CreateNodePod(2, 2, 2)]
    steps = _steps([delete, children, *creates, assign])
    assert steps == [[assign], [delete], [children], creates]
