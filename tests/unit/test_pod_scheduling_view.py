"""What the planner is told of a pod the scheduler has not placed: the scheduler's own words
(its PodScheduled=False condition), none for a placed pod or one held by a scheduling gate."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.models import labels
from phalanx.operator.observe import pod_view

NO_CLAIM = '0/3 nodes are available: persistentvolumeclaim "data" not found.'


def pod(condition: dict[str, str], node: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "j-1-0", "labels": {labels.EPOCH: "1", labels.NODE_RANK: "0"}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", **condition}]},
    }


@pytest.mark.parametrize(
    ("condition", "node", "expected"),
    [
        ({"status": "False", "reason": "Unschedulable", "message": NO_CLAIM}, None, NO_CLAIM),
        ({"status": "False", "reason": "SchedulerError"}, None, "SchedulerError"),
        ({"status": "False", "reason": "SchedulingGated", "message": "gated"}, None, None),
        ({"status": "True"}, "node-0", None),
    ],
    ids=["refused", "scheduler-error", "gated", "placed"],
)
def test_the_schedulers_words_reach_the_planner(
    condition: dict[str, str], node: str | None, expected: str | None
) -> None:
    view = pod_view(pod(condition, node))
    assert view is not None
    assert view.unschedulable == expected
