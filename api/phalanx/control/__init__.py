"""Job control: the verbs on TrainingJobs, their rules and their answers, with no HTTP in them.

The REST service (`phalanx.server`) and the CLI's kubeconfig mode (`phalanx.cli.kubedirect`) are
thin edges over `JobControl`; each maps `phalanx.control.errors` once, at its own edge.
"""

from phalanx.control.auth import Action, Authorizer, Caller
from phalanx.control.jobs import JobControl, JobSource, progress
from phalanx.control.kube import KubeJobs, KubeSource

__all__ = [
    "Action",
    "Authorizer",
    "Caller",
    "JobControl",
    "JobSource",
    "KubeJobs",
    "KubeSource",
    "progress",
]
