"""The agent's side of the in-place restart protocol: the assignment it reads and the report it
writes, as JSON, with the standard library only.

Why not the pydantic models of `phalanx.models.assignment`: the agent is injected into images
that have only `python3` (see `bundle`), so it cannot import pydantic. The operator keeps those
models and checks what agents write with them; `tests/unit/test_agent_wire.py` holds both sides
to one JSON (every field, both directions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from phalanx.models.vocabulary import AgentPhase, AgentState


class WireError(ValueError):
    """A message that is not a valid assignment (the agent ignores it, as the operator would)."""


def _int(data: dict[str, Any], key: str, minimum: int, maximum: int | None = None) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise WireError(f"{key} must be an integer >= {minimum}, not {value!r}")
    if maximum is not None and value > maximum:
        raise WireError(f"{key} must be at most {maximum}, not {value}")
    return value


@dataclass(frozen=True)
class Assignment:
    """Who runs epoch `epoch`: node ranks by pod name, and the epoch's rendezvous (the JSON of
    `phalanx.models.assignment.EpochAssignment`)."""

    epoch: int
    nodes: int
    master_addr: str
    master_port: int
    ranks: dict[str, int]

    @classmethod
    def from_json(cls, raw: str | bytes) -> Assignment:
        try:
            data = json.loads(raw)
        except ValueError as error:
            raise WireError(f"not JSON: {error}") from None
        if not isinstance(data, dict):
            raise WireError("an assignment is a JSON object")
        addr, ranks = data.get("masterAddr"), data.get("ranks")
        if not isinstance(addr, str) or not addr:
            raise WireError(f"masterAddr must be a non-empty string, not {addr!r}")
        if not isinstance(ranks, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in ranks.items()
        ):
            raise WireError(f"ranks must map pod names to node ranks, not {ranks!r}")
        return cls(
            epoch=_int(data, "epoch", 0),
            nodes=_int(data, "nodes", 1),
            master_addr=addr,
            master_port=_int(data, "masterPort", 1, 65535),
            ranks=dict(ranks),
        )


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True)
class Report:
    """What a pod's agent last did (the JSON of `phalanx.models.assignment.AgentReport`; the
    fields' meanings are documented there)."""

    pod: str
    state: AgentState
    time: datetime
    epoch: int = 0
    exit_code: int | None = None
    message: str | None = None
    failed_at: datetime | None = None
    workers: dict[str, int] = field(default_factory=dict)
    phase: AgentPhase | None = None
    renewed: datetime | None = None
    renew_seconds: float | None = None
    silent_nodes: dict[int, float] = field(default_factory=dict)

    def to_json(self) -> str:
        values: dict[str, Any] = {
            "pod": self.pod,
            "state": self.state,
            "epoch": self.epoch,
            "exitCode": self.exit_code,
            "message": self.message,
            "time": _time(self.time),
            "failedAt": _time(self.failed_at),
            "workers": self.workers,
            "phase": self.phase,
            "renewed": _time(self.renewed),
            "renewSeconds": self.renew_seconds,
            "silentNodes": {str(r): s for r, s in self.silent_nodes.items()},
        }
        return json.dumps({k: v for k, v in values.items() if v is not None})


def heartbeat_epoch(raw: str) -> int | None:
    """The epoch of a heartbeat JSON that rank 0's worker wrote (None: not a heartbeat). The
    agent passes the heartbeat on as it is; the operator checks it against its model."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    epoch = data.get("epoch") if isinstance(data, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
