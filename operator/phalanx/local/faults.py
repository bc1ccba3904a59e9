"""Failure injection and capacity changes for local runs: what to break, and when.

Why a schedule of plain data: the CLI parses flags into it, tests and `bench/recovery` build it
directly, and the runner applies what is due at each tick, recording when it struck so that
detection and recovery can be measured from the real moment of the fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

FaultKind = Literal["kill-node", "kill-rank", "hang-node"]

_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in `text`: `20s`, `1m30s`, `500ms`, `1.5h`, or a plain number of seconds."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise ValueError(f"duration {text!r} is negative")
        return seconds
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += float(match["value"]) * _UNITS[match["unit"]]
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration (examples: 20s, 1m30s, 500ms)")
    return total


@dataclass(frozen=True)
class Fault:
    """One injected failure, `at` seconds after the run starts."""

    kind: FaultKind
    at: float
    node_rank: int | None = None
    """The node (of the epoch running then) it hits; None: the last node rank."""
    rank: int | None = None
    """For kill-rank: the global worker rank to SIGKILL."""
    lose_node: bool = True
    """For kill-node: the machine is gone too (capacity drops by one), not just its processes."""


@dataclass(frozen=True)
class CapacityChange:
    """From `at` seconds on, the local cluster holds `nodes` nodes."""

    at: float
    nodes: int


@dataclass
class FaultPlan:
    """The faults and capacity changes of a run, each applied once when due."""

    faults: list[Fault] = field(default_factory=list)
    capacity: list[CapacityChange] = field(default_factory=list)

    def due_faults(self, elapsed: float) -> list[Fault]:
        """Faults due by `elapsed`, removed from the plan."""
        due = [f for f in self.faults if f.at <= elapsed]
        self.faults = [f for f in self.faults if f.at > elapsed]
        return sorted(due, key=lambda f: f.at)

    def due_capacity(self, elapsed: float) -> list[CapacityChange]:
        """Capacity changes due by `elapsed`, removed from the plan."""
        due = [c for c in self.capacity if c.at <= elapsed]
        self.capacity = [c for c in self.capacity if c.at > elapsed]
        return sorted(due, key=lambda c: c.at)


def parse_capacity_schedule(text: str) -> list[CapacityChange]:
    """`30s=4,90s=2` -> capacity 4 from 30 s, 2 from 90 s."""
    changes = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        when, sep, nodes = item.partition("=")
        if not sep or not nodes.strip().isdigit():
            raise ValueError(f"{item!r} is not TIME=NODES (example: 30s=4)")
        changes.append(CapacityChange(parse_duration(when), int(nodes)))
    return changes


def parse_kill_rank(text: str, default_at: float) -> Fault:
    """`RANK` or `RANK@TIME` (example: `1@30s`)."""
    rank, _, when = text.partition("@")
    if not rank.strip().isdigit():
        raise ValueError(f"{text!r} is not RANK or RANK@TIME (example: 1@30s)")
    at = parse_duration(when) if when else default_at
    return Fault("kill-rank", at, rank=int(rank))
