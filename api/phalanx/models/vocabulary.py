"""The in-place restart protocol's words, standard library only.

Why apart from `phalanx.models.assignment`: the agent runs in any image's `python3`, where
pydantic is not installed (it is injected into the pod, see `phalanx.agent.bundle`), so
what it shares with the operator must import nothing but the standard library. The pydantic
models in `assignment` read and check the same words on the operator's side.
"""

from __future__ import annotations

from typing import Literal

AgentState = Literal["standby", "running", "failed", "succeeded"]
AgentPhase = Literal["starting", "rendezvous", "loading", "first-step", "training", "untracked"]
"""How far a running epoch's workers on a pod got, the least advanced worker counting: started
by the agent (interpreter, imports), joining the process group and building the model, loading
the state to resume from, taking the epoch's first step, training. `untracked`: the program
reports no phases (a third-party script); only the agent's own liveness is known."""
PHASES: tuple[AgentPhase, ...] = ("starting", "rendezvous", "loading", "first-step", "training")
"""The tracked phases in the order an epoch goes through them."""
