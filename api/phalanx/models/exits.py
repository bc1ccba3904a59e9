"""Exit codes of the agent (the node pod's entrypoint), so the operator can classify a failure.

Why: a pod's exit code is the cheapest signal the operator gets. The agent maps what happened to
its workers onto these codes; everything else non-zero is the user's program failing.
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
APPLICATION: Final = 1
"""A worker (user code) failed."""
OOM_KILLED: Final = 74
"""A worker was killed by the kernel's OOM killer (the pod's memory cgroup counted the kill):
what Kubernetes calls OOMKilled when the container's main process is the one killed."""
COMMUNICATION: Final = 75
"""A collective timed out or a peer was lost (EX_TEMPFAIL): the platform, not the code."""
PREFLIGHT: Final = 76
"""A rank could not join the pre-training collective: a broken node or network."""
CHECKPOINTED: Final = 77
"""The workers saved a checkpoint of the step they had reached and stopped, because a rank of
the gang was asked to stop (SIGTERM: its pod preempted, evicted or deleted): all ranks agree on
it at the step's end (`phalanx.resume`). A consequence of that rank's disruption, not a fault of
its own."""

AGENT_UNSUPPORTED: Final = 78
"""The injected agent cannot run on the image's Python (older than 3.9): the operator runs the
job's command without it."""
STOPPED: Final = 79
"""A worker stayed stopped (SIGSTOP: a frozen process) past the hang timeout: found by its agent
in the process table, for any program, whether it reports steps or not."""
STORAGE_UNAVAILABLE: Final = 80
"""The image lacks the Python module its checkpoint URL's filesystem needs (s3fs for s3://,
gcsfs for gs://): found by the agent before any worker starts; a configuration error, no
restart."""
SIGNAL_BASE: Final = 128
"""128 + N: the process was killed by signal N (SIGKILL = 137, SIGTERM = 143)."""

INFRASTRUCTURE_CODES: Final = frozenset(
    {OOM_KILLED, COMMUNICATION, PREFLIGHT, CHECKPOINTED, STOPPED}
)


def killed_by_signal(code: int) -> bool:
    """Whether an exit code means the container was killed by a signal."""
    return code > SIGNAL_BASE
