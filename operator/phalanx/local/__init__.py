"""The embedded local backend: a TrainingJob's node pods as local process groups on one machine.

Why here, beside the operator: it is the operator's second executor. The same pure planner
(`phalanx.operator.planner.plan`) decides; this package observes local processes instead of pods
and carries out the plan with `subprocess` and signals instead of API calls, so resize and resume
behave exactly as on a cluster. It imports no Kubernetes client.
"""

from phalanx.local.cluster import LocalCluster
from phalanx.local.faults import CapacityChange, Fault, FaultPlan
from phalanx.local.runner import LocalRun, RunOptions
from phalanx.local.summary import RunSummary

__all__ = [
    "CapacityChange",
    "Fault",
    "FaultPlan",
    "LocalCluster",
    "LocalRun",
    "RunOptions",
    "RunSummary",
]
