"""Failure injection and capacity changes for local runs: what to break, and when.

When is a time, a training step, the first checkpoint, or a start-up phase: on a slow or busy
machine a fault timed from the run's start can strike before training began, so what a run
shows would depend on the machine's speed. Why a schedule of plain data: the CLI parses flags
into it, tests and `bench/recovery` build it directly, and the runner applies what is due at
each tick, recording when it struck so that detection and recovery can be measured from the
real moment of the fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypedDict

FaultKind = Literal["kill-node", "kill-rank", "hang-node", "hang-rank", "slow-node", "drain-node"]
"""hang-node freezes every process of a node pod (its agent too: the node falls silent);
hang-rank freezes one worker and leaves its agent running (a hung collective, a stuck kernel);
drain-node cordons the node for maintenance (a planned disruption: the job moves off it, then
the machine leaves)."""

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


PHASE_TRIGGERS = ("rendezvous", "loading", "first-step")
"""Start-up phases a fault can strike in (see phalanx.phases); `loading` means loading
a checkpoint, so it strikes in the first epoch that resumes from one."""


@dataclass(frozen=True)
class Fault:
    """One injected failure: due `at` seconds after the run starts, once training reached `step`,
    once a checkpoint is committed (`after_checkpoint`), or, with `phase`, when a worker of the
    target node enters that start-up phase (the conditions add up)."""

    kind: FaultKind
    at: float = 0.0
    node_rank: int | None = None
    """The node (of the epoch running then) it hits; None: the last node rank."""
    rank: int | None = None
    """For kill-rank: the global worker rank to SIGKILL."""
    lose_node: bool = True
    """For kill-node: the machine is gone too (capacity drops by one), not just its processes."""
    step: int | None = None
    """Due once the job's reported step reached this."""
    after_checkpoint: bool = False
    """Due once the job has a committed checkpoint."""
    phase: str | None = None
    """Armed when due, it strikes as a worker enters this phase (one of PHASE_TRIGGERS)."""
    slowdown: float = 4.0
    """For slow-node: the node's processes get 1/slowdown of the CPU from then on (see
    phalanx.local.throttle)."""

    def due(self, elapsed: float, step: int | None, checkpointed: bool) -> bool:
        """Whether its time, step and checkpoint conditions hold."""
        if elapsed < self.at or (self.after_checkpoint and not checkpointed):
            return False
        return self.step is None or (step is not None and step >= self.step)


class Trigger(TypedDict, total=False):
    """The `Fault` fields that say when it strikes."""

    at: float
    step: int
    after_checkpoint: bool
    phase: str


def parse_trigger(text: str) -> Trigger:
    """`Fault` fields for WHEN: a duration after the start (`20s`), `step:N` (once training
    reached step N: the program must report steps, as the reference trainer and scripts using
    phalanx.progress do), `checkpoint` (once a checkpoint is committed), or a start-up phase
    (`rendezvous`, `loading` (of a checkpoint), `first-step`: struck by the reference trainer's
    workers)."""
    text = text.strip()
    if text in PHASE_TRIGGERS:
        return {"phase": text}
    if text == "checkpoint":
        return {"after_checkpoint": True}
    kind, sep, value = text.partition(":")
    if sep and kind == "step":
        if not value.isdigit():
            raise ValueError(f"{text!r}: step:N takes a whole number (example: step:60)")
        return {"step": int(value)}
    try:
        return {"at": parse_duration(text)}
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time (20s), step:N, checkpoint, or a phase "
            f"({', '.join(PHASE_TRIGGERS)})"
        ) from None


@dataclass(frozen=True)
class CapacityChange:
    """From `at` seconds on (and once training reached `step`, when set), the local cluster
    holds `nodes` nodes."""

    at: float
    nodes: int
    step: int | None = None

    def due(self, elapsed: float, step: int | None) -> bool:
        if elapsed < self.at:
            return False
        return self.step is None or (step is not None and step >= self.step)


@dataclass
class FaultPlan:
    """The faults and capacity changes of a run, each applied once when due."""

    faults: list[Fault] = field(default_factory=list)
    capacity: list[CapacityChange] = field(default_factory=list)

    def due_faults(
        self, elapsed: float, step: int | None = None, checkpointed: bool = False
    ) -> list[Fault]:
        """Faults due now (see `Fault.due`), removed from the plan, earliest `at` first."""
        due = [f for f in self.faults if f.due(elapsed, step, checkpointed)]
        self.faults = [f for f in self.faults if f not in due]
        return sorted(due, key=lambda f: f.at)

    def due_capacity(self, elapsed: float, step: int | None = None) -> list[CapacityChange]:
        """Capacity changes due now, removed from the plan, earliest `at` first."""
        due = [c for c in self.capacity if c.due(elapsed, step)]
        self.capacity = [c for c in self.capacity if c not in due]
        return sorted(due, key=lambda c: c.at)


def parse_capacity_schedule(text: str) -> list[CapacityChange]:
    """`30s=4,step:90=2` -> capacity 4 from 30 s, 2 once training reached step 90."""
    changes = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        when, sep, nodes = item.partition("=")
        if not sep or not nodes.strip().isdigit():
            raise ValueError(f"{item!r} is not WHEN=NODES (examples: 30s=4, step:90=2)")
        trigger = parse_trigger(when)
        if "phase" in trigger or "after_checkpoint" in trigger:
            raise ValueError(f"{item!r}: capacity changes at a time or a step (30s=4, step:90=2)")
        changes.append(CapacityChange(trigger.get("at", 0.0), int(nodes), trigger.get("step")))
    return changes


def parse_kill_rank(text: str, default_at: float) -> Fault:
    """`RANK` or `RANK@WHEN` (examples: `1@30s`, `1@step:60`; see `parse_trigger`)."""
    rank, _, when = text.partition("@")
    if not rank.strip().isdigit():
        raise ValueError(f"{text!r} is not RANK or RANK@WHEN (examples: 1@30s, 1@step:60)")
    trigger = parse_trigger(when) if when else {"at": default_at}
    return Fault("kill-rank", rank=int(rank), **trigger)
