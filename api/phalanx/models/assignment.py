"""The in-place restart protocol between the operator and the pods' agents.

Why: recreating the whole gang on every failure costs pod scheduling, image start, Python and
torch imports, on every node. Instead the operator publishes each epoch's assignment (which pod
holds which node rank, where rank 0 listens) and a pod that is still healthy keeps running: its
agent stops its workers and starts the new epoch's. Each agent, in turn, reports its state, so
the operator learns of a failure without the pod failing. The same models travel through a file
on the local backend and through the job's Lease on a cluster. The agent itself speaks them
without pydantic (`phalanx.agent.wire`); `tests/unit/test_agent_wire.py` holds the two
sides to one JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from phalanx.models.base import KubeModel
from phalanx.models.vocabulary import PHASES, AgentPhase, AgentState

__all__ = ["PHASES", "AgentPhase", "AgentReport", "AgentState", "EpochAssignment"]


class EpochAssignment(KubeModel):
    """Who runs epoch `epoch`: node ranks by pod name, and the rendezvous of the epoch."""

    epoch: Annotated[int, Field(ge=0)]
    nodes: Annotated[int, Field(ge=1)]
    """Node pods in the epoch."""
    master_addr: Annotated[str, Field(min_length=1)]
    """Address of node rank 0's pod."""
    master_port: Annotated[int, Field(ge=1, le=65535)]
    """A fresh port per epoch, so a straggling worker of an earlier epoch can never join."""
    ranks: dict[str, Annotated[int, Field(ge=0)]]
    """Pod name -> node rank. A pod that is not named here stops its workers and stands by."""


class AgentReport(KubeModel):
    """What a pod's agent last did: it is alive and takes new assignments."""

    pod: Annotated[str, Field(min_length=1)]
    state: AgentState
    epoch: Annotated[int, Field(ge=0)] = 0
    """The epoch the state belongs to (0 while standing by before any assignment)."""
    exit_code: int | None = None
    """For `failed`: the code the pod would have exited with (see phalanx.models.exits)."""
    message: str | None = None
    """For `failed`: the one-line reason (as a termination message)."""
    time: datetime
    """When the state began."""
    failed_at: datetime | None = None
    """For `failed`: when the first worker failed (the start of the recovery)."""
    workers: dict[str, int] = Field(default_factory=dict)
    """Global rank -> process id of the running workers (for fault injection and debugging)."""
    phase: AgentPhase | None = None
    """For `running`: how far the epoch's start got on this pod."""
    renewed: datetime | None = None
    """For `running`: when the agent last said it is alive. It renews every heartbeat period
    until its workers train (from then on, the steps rank 0 reports show that every rank is
    alive, since a step needs them all); a pod whose agent goes silent before that is frozen."""
    renew_seconds: Annotated[float | None, Field(gt=0)] = None
    """How often the agent renews while it does: a pod counts as silent only after several
    renewals were missed, whatever the timeout."""

    silent_nodes: dict[int, float] = Field(default_factory=dict)
    """Node ranks of the epoch this agent has not heard from for the given seconds, after they
    spoke in it: node rank 0's agent hears every peer's pings, node ranks 1 and 2 hear node rank
    0's answers (`phalanx.agent.peers`). A frozen or cut-off machine, found by a live peer."""
