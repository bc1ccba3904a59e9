"""An image in which the injected agent cannot run: the job says what it loses and runs on
without it, charged nothing.

Covers: a container the runtime could not start (no such interpreter) and the agent's own exit
for a Python older than 3.9, both read as the agent failing only on pods it was injected into;
the AgentInjected condition and Warning event naming what is lost; the new epoch's pods created
without the agent; no restart budget charged; a pod without the agent failing the same way is
the user's failure, as before.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from phalanx.models import TrainingJob, exits
from phalanx.operator.planner import CreateNodePod, Observed
from tests.unit.planner.builders import at, job, pods, step

NOT_FOUND = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
    'exec: "python3": executable file not found in $PATH'
)


def running_epoch_1() -> TrainingJob:
    j, _ = step(job(), Observed(), at(0))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4, agent_injected=True))), at(5))
    return j


@pytest.mark.parametrize(
    ("reason", "code", "message"),
    [("StartError", 128, NOT_FOUND), ("Error", exits.AGENT_UNSUPPORTED, "needs Python 3.9")],
    ids=["no-interpreter", "python-too-old"],
)
def test_an_agent_that_cannot_run_is_dropped_and_said(reason: str, code: int, message: str) -> None:
    j = running_epoch_1()
    gang = pods(1, 4, agent_injected=True)
    gang = [replace(p, phase="Failed", terminated_reason=reason, exit_code=code, message=message)
            for p in gang]  # fmt: skip
    j, plan = step(j, Observed(pods=tuple(gang)), at(6))
    assert j.status is not None
    assert j.status.epoch == 2
    assert j.status.restarts.total == 0, "not the job's failure: no budget charged"
    [condition] = [c for c in j.status.conditions if c.type == "AgentInjected"]
    assert (condition.status, condition.reason) == ("False", "AgentCannotRun")
    assert "without in-place restarts, hot spares" in condition.message
    assert message[:40] in condition.message
    [warning] = [e for e in plan.events if e.reason == "AgentNotInjected"]
    assert warning.type == "Warning"
    assert [f.reason for f in j.status.failures] == ["AgentCannotRun"]

    j, plan = step(j, Observed(), at(7))
    created = plan.of_type(CreateNodePod)
    assert len(created) == 4
    assert not any(c.agent for c in created), "the new epoch runs the command bare"


def test_a_pod_without_the_agent_that_fails_to_start_is_the_users_failure() -> None:
    j, _ = step(job(), Observed(), at(0))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(5))
    gang = [replace(p, phase="Failed", terminated_reason="StartError", exit_code=128,
                    message=NOT_FOUND) for p in pods(1, 4)]  # fmt: skip
    j, _ = step(j, Observed(pods=tuple(gang)), at(6))
    assert j.status is not None
    assert not [c for c in j.status.conditions if c.type == "AgentInjected"]
    assert j.status.restarts.application == 1
