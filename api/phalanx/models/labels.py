"""Labels and annotations Phalanx puts on the objects it creates: how observers find a job's pods.

Why shared: the operator sets them, the API service and the local backend select by them.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "phalanx.dev/"
JOB: Final = PREFIX + "job"
"""The TrainingJob's name, on every child object."""
EPOCH: Final = PREFIX + "epoch"
"""The restart generation a node pod belongs to."""
NODE_RANK: Final = PREFIX + "node-rank"
"""A node pod's rank within its epoch (0..nodes-1); a standby pod's index."""
ROLE: Final = PREFIX + "role"
"""`node` for a gang member, `standby` for a pod that holds capacity for growing back."""
WARM: Final = PREFIX + "warm"
"""`true` on a standby pod that runs the job's agent (a hot spare that can take a rank in
place); a standby pod without it only holds capacity."""
NNODES: Final = PREFIX + "nnodes"
"""The node count of the epoch a pod belongs to, so an epoch can be rebuilt from its pods."""
HEARTBEAT: Final = PREFIX + "heartbeat"
"""Annotation on the heartbeat Lease holding the JSON `Heartbeat`."""
ASSIGNMENT: Final = PREFIX + "assignment"
"""Annotation on the assignment Lease holding the current epoch's JSON `EpochAssignment`."""
AGENT: Final = PREFIX + "agent"
"""Annotation on a node or warm standby pod: what runs its command (`injected`: the agent, put
in front of it; `image`: the image's own agent; else why it runs bare, see
phalanx.operator.builder.agent)."""
AGENT_REPORT_PREFIX: Final = "agent.phalanx.dev/"
"""`agent.phalanx.dev/<pod>` annotations on the heartbeat Lease: each agent's JSON `AgentReport`."""

KUEUE_QUEUE: Final = "kueue.x-k8s.io/queue-name"
"""On a TrainingJob: the Kueue LocalQueue that admits it, through a Workload the operator makes
(phalanx.operator.planner.queueing)."""

ROLE_NODE: Final = "node"
ROLE_STANDBY: Final = "standby"


def job_selector(job: str) -> str:
    """The label selector of all pods of `job`."""
    return f"{JOB}={job}"
