"""In-process recovery: a worker that outlives its epoch's process group.

When a rank fails, the gang's collectives fail on every other rank. A survivor that can take the
next epoch in-process does not exit: its agent hands it the next epoch's variables (a file,
PHALANX_NEXT_EPOCH_FILE), it leaves the broken process group and joins the next one, and the
ranks agree on the newest complete step any of them holds in memory (`converge`); the lowest rank
holding it sends it to the ranks that do not. A survivor pays neither its model's build nor a
snapshot's load; only a new or replaced rank builds, and it takes the state from a survivor.

Why a file: the agent imports no torch and reaches its workers only through files and signals. A
training worker whose hand-over file appears leaves its epoch at the step's end (a resize while
every rank is healthy: no collective fails to tell it); the ranks agree on that step
(`Resumable`'s one collective per step), and a stat of the file is all it costs a step.

What must hold for the state to be whole: the model's and optimizer's state is replicated on
every data-parallel rank (DDP), and a step counts as held only once its optimizer step and
`Resumable.step_done` both ran (a step that failed after its optimizer step is not held: the
rank takes the newest held step from a peer). Sharded states (FSDP, tensor and pipeline
parallelism) are not sent here: their survivors restart as before.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from phalanx.models import env
from phalanx.resume import devices

POLL_SECONDS = 0.005
"""How often a held worker looks for its next epoch (the agent writes it at once)."""


class NewEpoch(Exception):  # noqa: N818 (not an error: the way out of an epoch)
    """Every rank agreed, at a step's end, to leave the epoch for the next one (`handed_over`)."""


def next_epoch_file() -> Path | None:
    """Where this worker's agent hands it the next epoch; None: not in-process (no agent, or
    an agent that restarts its workers)."""
    path = os.environ.get(env.PHALANX_NEXT_EPOCH_FILE)
    return Path(path) if path else None


def announce() -> None:
    """Tell the agent that this worker takes the next epoch in-process (a marker beside the
    hand-over file); without it the agent restarts the worker as before."""
    if (path := next_epoch_file()) is not None:
        Path(str(path) + env.IN_PROCESS_READY_SUFFIX).touch()


def handed_over() -> bool:
    """Whether the agent has handed this worker the next epoch, not yet taken."""
    path = next_epoch_file()
    return path is not None and path.exists()


def wait_for_next_epoch() -> dict[str, str]:
    """The next epoch's variables, once the agent writes them (it writes a whole file and renames
    it into place). A worker whose agent restarts it instead is killed while it waits."""
    path = next_epoch_file()
    assert path is not None, "in-process recovery without an agent"
    while True:
        try:
            handed = json.loads(path.read_text())
        except FileNotFoundError:
            time.sleep(POLL_SECONDS)
            continue
        path.unlink()
        return {str(k): str(v) for k, v in handed.items()}


def take(variables: dict[str, str]) -> None:
    """Make the next epoch's variables this process's environment (RANK, WORLD_SIZE,
    MASTER_ADDR...), as its agent would have started it with them."""
    os.environ.update(variables)


Leaf = tuple[tuple[str, ...], Any]
"""A state dict's leaf: its path of keys, and its value."""
Skeleton = list[Leaf]
"""A state dict's leaves with each tensor described by its shape and dtype."""


def converge(state: Any, holds: int | None) -> int | None:
    """Agree on the newest step a rank holds whole in memory (`holds`: this rank's, None for
    none) and send it from the lowest rank holding it to every rank that holds another (or none):
    their `state` (an `AppState`) is loaded with it. That step, or None when no rank holds one (the
    ranks then resume as after a restart: snapshots, else storage)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return holds
    held: list[int | None] = [None] * dist.get_world_size()
    dist.all_gather_object(held, holds)
    newest = max((h for h in held if h is not None), default=None)
    if newest is None:
        return None
    source = held.index(newest)
    needs = sorted(rank for rank, h in enumerate(held) if h != newest)
    if needs:
        members = sorted({source, *needs})
        group = dist.new_group(members)  # every rank makes it, members or not
        if dist.get_rank() in members:
            received = _send(state, source, group)
            if received is not None:
                state.load_state_dict(received)
    return newest


def _send(state: Any, source: int, group: Any) -> dict[str, Any] | None:
    """`state`'s state dict from `source` to the group's other ranks, tensor by tensor (no
    pickling of tensors): what a receiver got, None on the source."""
    sending = dist.get_rank() == source
    leaves = _leaves(state.state_dict()) if sending else []
    shape: list[Skeleton | None] = [
        [(path, _describe(value)) for path, value in leaves] if sending else None
    ]
    dist.broadcast_object_list(shape, src=source, group=group)
    skeleton = shape[0]
    assert skeleton is not None
    device = devices.for_group(group)
    values = dict(leaves)
    received: dict[str, Any] = {}
    for path, described in skeleton:
        if isinstance(described, tuple) and described[0] == "tensor":
            _, size, dtype = described
            tensor = (values[path].detach().contiguous().to(device) if sending
                      else torch.empty(size, dtype=dtype, device=device))  # fmt: skip
            dist.broadcast(tensor, src=source, group=group)
            _put(received, path, tensor)
        else:
            _put(received, path, described[1])
    return None if sending else received


def _leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[Leaf]:
    found: list[Leaf] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            found += _leaves(value, (*prefix, key))
        elif isinstance(value, DTensor):
            raise TypeError(f"{'.'.join((*prefix, key))} is sharded: not sent in-process")
        else:
            found.append(((*prefix, key), value))
    return found


def _describe(value: Any) -> tuple[str, Any, Any] | tuple[str, Any]:
    if isinstance(value, torch.Tensor):
        return "tensor", tuple(value.shape), value.dtype
    return "value", value


def _put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value
