"""A memory snapshot loaded after a restart (`memory`'s other half): what this pod holds, what every
rank of the new epoch offers, the step `peers.decide` picks, and the units sent between peers
that one rank holds and another needs.

Why apart from taking snapshots: loading runs once per epoch, at the start, with collectives over
the whole new world (every rank's offer, then the transfers in one total order); taking them runs
every few steps on one rank's own slots. They share only the slots' format (`arena`) and the wire
(`wire`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from phalanx.resume import arena, peers, wire
from phalanx.resume.arena import Header, Slot, Unit
from phalanx.resume.collectives import all_ok, rank_and_world
from phalanx.resume.statedict import has_shards, restore_into

log = logging.getLogger(__name__)


def held(directory: Path | None) -> dict[Unit, Slot]:
    """Every whole slot in the pod's memory `directory` (own, pod siblings', kept), by unit; none
    without a directory (snapshots off)."""
    if directory is None:
        return {}
    found: dict[Unit, Slot] = {}
    for meta in sorted(directory.glob("*.meta")):
        slot = Slot(directory, meta.stem)
        header = slot.header()
        if header is not None:
            found.setdefault(header.unit, slot)
    return found


def load(
    state: Any,
    storage_step: int | None,
    held: dict[Unit, Slot],
    part: str,
    process_group: dist.ProcessGroup | None,
    group: dist.ProcessGroup | None,
) -> tuple[int, str] | None:
    """Load into `state` the step `peers.decide` picks over every rank's offer (this rank's:
    `held`, its `part`) when it is not older than `storage_step`, the newest valid checkpoint on
    storage: the step and where it came from ("memory" or "peer"), or None (every rank loads
    from storage). `process_group` gathers the offers, `group` carries the transfers."""
    live = state.state_dict()
    rank, world = rank_and_world()
    offer = peers.Offer(rank, world, part, not has_shards(live), frozenset(held))
    plan = peers.decide(_gather(offer, process_group), -1 if storage_step is None else storage_step)
    if plan is None:
        return None
    received = _transfer(plan.transfers, held, rank, group)
    error = None
    try:
        saved = arena.assemble(plan.needs[rank], held, received)
        state.load_state_dict(restore_into(live, saved))
    except (ValueError, RuntimeError, IndexError, KeyError) as exc:
        error = exc
    if not all_ok(error is None, process_group):
        log.warning("memory snapshot of step %d not loaded (%s); using storage", plan.step, error)
        return None
    return plan.step, plan.source


def _transfer(
    transfers: tuple[peers.Transfer, ...],
    held: dict[Unit, Slot],
    rank: int,
    group: dist.ProcessGroup | None,
) -> dict[Unit, tuple[Header, torch.Tensor] | None]:
    """Go through the plan's transfers in order, sending what this rank holds and receiving
    what it needs (in one total order, so no two ranks wait on each other)."""
    received: dict[Unit, tuple[Header, torch.Tensor] | None] = {}
    for transfer in transfers:
        if group is None:
            break
        if transfer.source == rank:
            read = held[transfer.unit].read()
            header, data = read if read is not None else (None, None)
            wire.send(header, data, transfer.target, group)
        elif transfer.target == rank:
            received[transfer.unit] = wire.receive(transfer.source, group)
    return received


def _gather(offer: peers.Offer, process_group: dist.ProcessGroup | None) -> list[peers.Offer]:
    if not dist.is_initialized():
        return [offer]
    offers: list[Any] = [None] * dist.get_world_size(process_group)
    dist.all_gather_object(offers, offer, group=process_group)
    return offers
