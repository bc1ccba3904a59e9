"""Where a worker's start is: the phase it entered, for its agent to report (and, in local runs,
the faults armed to strike when a worker enters a phase).

Why a file per worker: the agent never imports torch and must keep reporting while its workers
are busy or frozen, so it reads what they wrote instead of asking them. The agent renews its
report with the least advanced phase of its workers until they all train; the operator takes an
agent that stops renewing for a frozen pod, whatever the phase (see the planner's `startup`).

Why faults here: a phase such as a checkpoint load lasts a fraction of a second on a small job,
so a fault aimed at it from outside would land early or late. `phalanx run --hang-node-at
loading` arms one in the run's fault directory; the worker that enters that phase on the target
node claims it (an atomic rename: one worker strikes, once), records the moment and stops itself
there (SIGSTOP) or dies (SIGKILL). The runner then applies the rest (stops or kills the node).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from phalanx import progress
from phalanx.models import env
from phalanx.models.vocabulary import AgentPhase

ARMED_SUFFIX = env.FAULT_ARMED_SUFFIX
STRUCK_SUFFIX = env.FAULT_STRUCK_SUFFIX


def enter(phase: AgentPhase, resuming: bool = False) -> None:
    """Record that this worker entered `phase`; `resuming`: it loads a checkpoint (a fault armed
    for `loading` strikes only then)."""
    progress.phase(phase)
    if directory := os.environ.get(env.PHALANX_FAULT_DIR):
        strike_if_armed(Path(directory), phase, resuming)


def read(path: Path) -> str | None:
    """The phase a worker last wrote (None before its first)."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _aimed_here(fault: dict[str, object], phase: str, resuming: bool) -> bool:
    if fault.get("phase") != phase or (phase == "loading" and not resuming):
        return False
    if (rank := fault.get("rank")) is not None:
        return str(rank) == os.environ.get(env.RANK)
    node_rank = fault.get("nodeRank")
    if node_rank is None:  # the last node of the epoch
        node_rank = int(os.environ.get(env.NNODES, "1")) - 1
    return str(node_rank) == os.environ.get(env.NODE_RANK, "0")


def strike_if_armed(directory: Path, phase: str, resuming: bool) -> None:
    """Strike a fault armed for `phase` on this worker's node (or rank), if any."""
    for armed in sorted(directory.glob(f"*{ARMED_SUFFIX}")):
        try:
            fault = json.loads(armed.read_text())
        except (OSError, ValueError):
            continue
        if not _aimed_here(fault, phase, resuming):
            continue
        struck = armed.with_suffix(STRUCK_SUFFIX)
        try:
            armed.rename(struck)  # one worker claims it
        except FileNotFoundError:
            continue
        record = {**fault, "time": time.time(), "pid": os.getpid(),
                  "pod": os.environ.get(env.PHALANX_POD_NAME),
                  "epoch": int(os.environ.get(env.PHALANX_EPOCH, "0"))}  # fmt: skip
        tmp = struck.with_name(f".{struck.name}.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(struck)
        own = signal.SIGKILL if fault.get("kind") == "kill-rank" else signal.SIGSTOP
        os.kill(os.getpid(), own)
        return
