"""The pure half of the operator: `plan(job, observed, now) -> Plan`.

Nothing here performs I/O or imports a Kubernetes client (an import-linter contract holds it to
that), so every policy is table-tested without a cluster, and the local backend reuses it.
"""

from phalanx.operator.planner.actions import (
    Action,
    AssignEpoch,
    CreateNodePod,
    CreateStandbyPod,
    DeleteJob,
    DeletePods,
    EmitEvent,
    EnsureChildren,
    EnsurePodGroup,
    EnsureWorkload,
    Executor,
    FinishWorkload,
    MarkPodsReady,
    ObserveRecovery,
    PatchStatus,
    Plan,
    ReleaseQuota,
)
from phalanx.operator.planner.observed import (
    ChildRefusal,
    Heartbeat,
    NodeView,
    Observed,
    PodView,
    WorkloadView,
)
from phalanx.operator.planner.plan import PlannerConfig, plan

__all__ = [
    "Action",
    "AssignEpoch",
    "ChildRefusal",
    "CreateNodePod",
    "CreateStandbyPod",
    "DeleteJob",
    "DeletePods",
    "EmitEvent",
    "EnsureChildren",
    "EnsurePodGroup",
    "EnsureWorkload",
    "Executor",
    "FinishWorkload",
    "Heartbeat",
    "MarkPodsReady",
    "NodeView",
    "ObserveRecovery",
    "Observed",
    "PatchStatus",
    "Plan",
    "PlannerConfig",
    "PodView",
    "ReleaseQuota",
    "WorkloadView",
    "plan",
]
