"""Snapshots between ranks: a slot's header and bytes sent as tensors (two small messages and
the raw bytes in one), never pickled state.

Why the gloo side group and host tensors: a snapshot is host memory on both ends (a pod's memory
directory), so it goes host to host; staging it through a GPU to use NCCL would cost device
memory and two more copies. A group of its own keeps these messages from mixing with training's
collectives or a checkpoint's, and the buddy copy runs on the snapshot's background thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.distributed as dist

from phalanx.resume.arena import ALIGN, Header, Slot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Roles:
    """This rank's places among its peers for snapshots."""

    piece: int
    """Its index among the ranks of its pod holding the same part of the model."""
    pieces: int
    """How many there are: each writes one piece of a replicated state."""
    buddy: int | None
    """The rank (same place, next pod) that keeps a copy of this rank's shard; None: one pod."""
    keeps_for: int | None
    """The rank (same place, previous pod) whose shard this rank keeps a copy of."""


def roles(rank: int, places: list[tuple[str, str]]) -> Roles:
    """`rank`'s roles from every rank's (pod, part), by rank. Pods are ordered by their lowest
    rank; a rank's buddy has its index in the next pod (if that pod has as many ranks)."""
    pod, part = places[rank]
    siblings = [r for r, place in enumerate(places) if place == (pod, part)]
    members: dict[str, list[int]] = {}
    for r, (p, _) in enumerate(places):
        members.setdefault(p, []).append(r)
    order = list(members)  # by lowest rank: dicts keep insertion order
    here, index = order.index(pod), members[pod].index(rank)

    def at(offset: int) -> int | None:
        if len(order) < 2:
            return None
        ranks = members[order[(here + offset) % len(order)]]
        return ranks[index] if index < len(ranks) else None

    return Roles(siblings.index(rank), len(siblings), at(1), at(-1))


def send(
    header: Header | None, data: torch.Tensor | None, to: int, group: dist.ProcessGroup
) -> None:
    """A slot to rank `to` (None: nothing, so that the receiver's `receive` returns None)."""
    meta = _meta(header)
    dist.send(torch.tensor([meta.numel()]), to, group=group)
    if header is not None and data is not None:
        dist.send(meta, to, group=group)
        if header.size:
            dist.send(data[: header.size], to, group=group)


def receive(
    source: int, group: dist.ProcessGroup, into: Slot | None = None
) -> tuple[Header, torch.Tensor] | None:
    """A slot from rank `source`: into `into`'s bytes (then committed), else a new buffer."""
    length = torch.zeros(1, dtype=torch.int64)
    dist.recv(length, source, group=group)
    if not int(length):
        return None
    meta = torch.empty(int(length), dtype=torch.uint8)
    dist.recv(meta, source, group=group)
    header = Header.loads(meta.numpy().tobytes())
    data, slot = _target(header.size, into)
    if header.size:
        dist.recv(data[: header.size], source, group=group)
    if slot is not None:
        slot.commit(header)
    return header, data


def exchange(
    roles: Roles, header: Header | None, data: torch.Tensor | None, keep: Slot | None,
    group: dist.ProcessGroup,
) -> None:  # fmt: skip
    """This rank's newest slot to its buddy, and its keeper's slot into `keep`, at once (each
    rank sends before it receives would deadlock a ring of blocking sends)."""
    sending = None
    if roles.buddy is not None:
        sending = _Sender(header, data, roles.buddy, group)
    if roles.keeps_for is not None:
        receive(roles.keeps_for, group, keep)
    if sending is not None:
        sending.wait()


class _Sender:
    """`send` with non-blocking messages: the receive beside it runs while these go."""

    def __init__(self, header: Header | None, data: torch.Tensor | None, to: int,
                 group: dist.ProcessGroup) -> None:  # fmt: skip
        meta = _meta(header)
        self._length = torch.tensor([meta.numel()])
        self._works = [dist.isend(self._length, to, group=group)]
        if header is not None and data is not None:
            self._meta = meta
            self._works.append(dist.isend(meta, to, group=group))
            if header.size:
                self._works.append(dist.isend(data[: header.size], to, group=group))

    def wait(self) -> None:
        for work in self._works:
            if work is not None:
                work.wait()


def _meta(header: Header | None) -> torch.Tensor:
    if header is None:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(header.dumps()), dtype=torch.uint8)


def _target(size: int, into: Slot | None) -> tuple[torch.Tensor, Slot | None]:
    """Where received bytes go: the keeping slot's mapping (invalidated first), or, when there is
    none or it cannot grow (a full memory volume), a buffer that is dropped after."""
    if into is not None:
        try:
            into.invalidate()
            return into.buffer(size), into
        except (OSError, RuntimeError) as error:
            log.warning("a peer's memory snapshot not kept: %s", error)
    return torch.empty(max(size, ALIGN), dtype=torch.uint8), None
