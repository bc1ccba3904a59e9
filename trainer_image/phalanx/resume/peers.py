"""Which memory snapshot a new epoch resumes from, and which rank sends what to whom: a pure
decision over what every rank offers, taken alike on every rank.

Every rank of the new epoch offers the units its pod's memory directory holds (its own slots,
its pod siblings', and the copies it keeps for its buddy in another pod) and says what it needs:
a sharded rank (FSDP, tensor parallel) its own shard of its own world size (`Unit` kind
"shard"), a replicated rank (DDP) every piece of one partition of its part's state (kind
"piece"; the ranks of a pod write one piece each). The newest step not older than storage's
newest valid checkpoint for which every rank's needs are held somewhere wins. A rank loads
what its own pod holds from memory; the rest a holder sends it (the lowest rank holding it):
a replacement pod's ranks get their shards from the buddy copies, a replicated state from any
pod that holds it. When no step is complete, every rank loads from storage: no rank ever
resumes from a step its peers do not.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.resume.arena import Unit


@dataclass(frozen=True)
class Offer:
    """What one rank of the new epoch holds and needs."""

    rank: int
    world: int
    part: str
    replicated: bool
    held: frozenset[Unit]


@dataclass(frozen=True)
class Transfer:
    """`unit` sent from rank `source` to rank `target`."""

    unit: Unit
    source: int
    target: int


@dataclass(frozen=True)
class Plan:
    """The step every rank resumes from, the units each rank loads (in order), and what is sent
    (in the order every rank goes through)."""

    step: int
    needs: dict[int, tuple[Unit, ...]]
    transfers: tuple[Transfer, ...]

    @property
    def source(self) -> str:
        """Where the units come from: "peer" when any rank gets one sent, else "memory"."""
        return "peer" if self.transfers else "memory"


def decide(offers: list[Offer], floor: int) -> Plan | None:
    """The newest complete step not older than `floor` (-1: no checkpoint on storage), or None."""
    steps = sorted({u.step for o in offers for u in o.held if u.step >= floor}, reverse=True)
    for step in steps:
        held = {u for o in offers for u in o.held if u.step == step}
        needs: dict[int, tuple[Unit, ...]] = {}
        for offer in offers:
            units = _needed(offer, step, held)
            if units is None:
                break
            needs[offer.rank] = units
        else:
            return Plan(step, needs, _transfers(offers, needs))
    return None


def _needed(offer: Offer, step: int, held: set[Unit]) -> tuple[Unit, ...] | None:
    """The units `offer`'s rank loads at `step`, if they are all held somewhere."""
    if not offer.replicated:
        shard = Unit(step, offer.part, "shard", offer.rank, offer.world)
        return (shard,) if shard in held else None
    partitions = sorted({u.of for u in held if u.kind == "piece" and u.part == offer.part})
    complete = [
        tuple(Unit(step, offer.part, "piece", index, count) for index in range(count))
        for count in partitions
    ]
    complete = [units for units in complete if set(units) <= held]
    if not complete:
        return None
    return max(complete, key=lambda units: (len(set(units) & offer.held), -len(units)))


def _transfers(offers: list[Offer], needs: dict[int, tuple[Unit, ...]]) -> tuple[Transfer, ...]:
    by_rank = {offer.rank: offer for offer in offers}
    holders: dict[Unit, int] = {}
    for offer in sorted(offers, key=lambda o: o.rank):
        for unit in offer.held:
            holders.setdefault(unit, offer.rank)
    return tuple(
        Transfer(unit, holders[unit], rank)
        for rank in sorted(needs)
        for unit in needs[rank]
        if unit not in by_rank[rank].held
    )
