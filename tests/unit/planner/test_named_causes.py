"""Common mistakes named in the job's conditions, within one reconcile, in the words of the part
of Kubernetes that found them.

Covers: a pod the scheduler cannot place (a missing claim, too few GPUs) puts the scheduler's own
message in Unschedulable at once, long before scheduleTimeoutSeconds; the shrink's message at the
timeout keeps it; the condition clears once the pods are placed. A pod refused for want of a
ServiceAccount is a ConfigurationError (MissingObject) with the API server's words and one
Warning event; its creates are tried again every few seconds, not in a tight loop, and the
condition is resolved once the pods exist, with no spec change.
"""

from __future__ import annotations

from phalanx.models import TrainingJob
from phalanx.operator.planner import ChildRefusal, CreateNodePod, Observed, Plan
from phalanx.operator.planner.refusal import RETRY_SECONDS
from tests.unit.planner.builders import at, job, pods, step

NO_CLAIM = (
    '0/3 nodes are available: persistentvolumeclaim "phalanx-checkpoints" not found. '
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
NO_ACCOUNT = (
    'pods "j-1-0" is forbidden: error looking up service account default/trainer: '
    'serviceaccount "trainer" not found'
)


def condition(j: TrainingJob, kind: str) -> tuple[str, str, str] | None:
    assert j.status is not None
    found = next((c for c in j.status.conditions if c.type == kind), None)
    return (found.status, found.reason, found.message) if found else None


def started() -> TrainingJob:
    """A job of 2 to 4 nodes whose first epoch (4 pods) was decided at 0 s."""
    j, _ = step(job(), Observed(), at(0))
    return j


def unplaced(n: int, placed: int = 0) -> Observed:
    """The epoch's `n` pods, the first `placed` bound to nodes, the rest refused by the scheduler."""
    views = pods(1, n, phase="Pending")
    return Observed(pods=tuple(
        p if p.rank < placed else p.but(node_name=None, unschedulable=NO_CLAIM) for p in views
    ))  # fmt: skip


def test_the_schedulers_reason_is_the_condition_at_once() -> None:
    j, _ = step(started(), unplaced(4), at(2))
    expected = f"pod j-1-0 (and 3 more pods): {NO_CLAIM}"
    assert condition(j, "Unschedulable") == ("True", "PodUnschedulable", expected)


def test_the_shrink_at_the_timeout_keeps_the_schedulers_reason() -> None:
    j, _ = step(started(), unplaced(4, placed=1), at(2))
    j, _ = step(j, unplaced(4, placed=1), at(400))
    status, reason, message = condition(j, "Unschedulable") or ("", "", "")
    assert (status, reason) == ("True", "InsufficientCapacity")
    assert message.startswith("only 1 of 4 node pods could be scheduled; ")
    assert message.endswith(f"pod j-1-1 (and 2 more pods): {NO_CLAIM}")


def test_the_condition_clears_once_the_pods_are_placed() -> None:
    j, _ = step(started(), unplaced(4), at(2))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4, phase="Pending"))), at(3))
    assert condition(j, "Unschedulable") == ("False", "Scheduled", "")


def creates(plan: Plan) -> list[CreateNodePod]:
    return plan.of_type(CreateNodePod)


def test_a_missing_service_account_is_named_and_tried_again_until_it_exists() -> None:
    refusal = ChildRefusal(
        kind="Pod", name="j-1-0", message=NO_ACCOUNT, generation=1, lasting=False
    )
    j, plan = step(started(), Observed(refused=refusal), at(1))
    expected = f"the API server refuses Pod j-1-0 until it exists: {NO_ACCOUNT}"
    assert condition(j, "ConfigurationError") == ("True", "MissingObject", expected)
    assert [(e.reason, e.message) for e in plan.events if e.type == "Warning"] == [
        ("ConfigurationError", expected)
    ]
    assert creates(plan) == [], "not again in the plan that learnt of it"
    assert plan.requeue_after == RETRY_SECONDS

    j, plan = step(j, Observed(), at(1 + RETRY_SECONDS))  # tried again: still missing
    assert len(creates(plan)) == 4
    assert condition(j, "ConfigurationError") == ("True", "MissingObject", expected)
    j, plan = step(j, Observed(refused=refusal), at(2 + RETRY_SECONDS))
    assert [e for e in plan.events if e.type == "Warning"] == [], "one event, not one a retry"

    j, plan = step(j, Observed(), at(3 + 2 * RETRY_SECONDS))  # the account was made
    assert len(creates(plan)) == 4
    j, _ = step(j, Observed(pods=tuple(pods(1, 4, phase="Pending"))), at(4 + 2 * RETRY_SECONDS))
    assert condition(j, "ConfigurationError") == ("False", "Resolved", "")


def test_an_image_without_its_checkpoint_filesystem_is_a_configuration_error() -> None:
    reason = "spec.checkpoint.url s3://team-a/llama needs the Python module s3fs, which ..."
    failed = tuple(
        p.but(exit_code=80, terminated_reason="Error", message=reason)
        for p in pods(1, 4, phase="Failed")
    )
    j, plan = step(started(), Observed(pods=failed), at(5))
    status, kind, message = condition(j, "ConfigurationError") or ("", "", "")
    assert (status, kind) == ("True", "CheckpointStorageUnavailable")
    assert message == f"pod j-1-0: CheckpointStorageUnavailable: {reason}"
    assert j.status is not None
    assert j.status.restarts.total == 0, "no restart spent"
    assert creates(plan) == []
