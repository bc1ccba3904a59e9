"""Which snapshot a new epoch loads and who sends what (`peers.decide`), and each rank's place
for snapshots (`wire.roles`): pure decisions, checked on the cases a failure leaves. The ranks
carrying them out run in tests/trainer/test_memory_agreement.py."""

from __future__ import annotations

import itertools

import torch

from phalanx.resume import arena
from phalanx.resume.arena import Unit
from phalanx.resume.peers import Offer, Transfer, decide
from phalanx.resume.wire import Roles, roles


def shard(step: int, owner: int, of: int = 4) -> Unit:
    return Unit(step, "model", "shard", owner, of)


def piece(step: int, index: int, of: int) -> Unit:
    return Unit(step, "model", "piece", index, of)


def sharded(rank: int, *held: Unit, world: int = 4) -> Offer:
    return Offer(rank, world, "model", False, frozenset(held))


def replicated(rank: int, *held: Unit, world: int = 2) -> Offer:
    return Offer(rank, world, "model", True, frozenset(held))


def test_every_rank_from_its_own_memory_when_all_hold_the_step() -> None:
    offers = [sharded(r, shard(10, r), shard(20, r)) for r in range(4)]
    plan = decide(offers, floor=-1)
    assert plan is not None
    assert (plan.step, plan.source, plan.transfers) == (20, "memory", ())


def test_a_replacement_rank_gets_its_shard_from_the_buddy_that_kept_it() -> None:
    offers = [sharded(r, shard(20, r), shard(20, (r - 1) % 4)) for r in range(4)]
    offers[2] = sharded(2)  # a new pod: nothing
    plan = decide(offers, floor=-1)
    assert plan is not None
    assert (plan.step, plan.source) == (20, "peer")
    assert plan.transfers == (Transfer(shard(20, 2), 3, 2),), "rank 3 kept rank 2's shard"


def test_storage_wins_when_newer_and_memory_when_as_new() -> None:
    offers = [sharded(r, shard(20, r)) for r in range(4)]
    assert decide(offers, floor=30) is None
    plan = decide(offers, floor=20)
    assert plan is not None
    assert plan.step == 20


def test_a_step_some_rank_cannot_get_is_skipped_for_an_older_one() -> None:
    offers = [sharded(r, shard(20, r), shard(30, r)) for r in range(4)]
    offers[1] = sharded(1, shard(20, 1))  # killed while writing 30, its buddy never got it
    plan = decide(offers, floor=-1)
    assert plan is not None
    assert (plan.step, plan.transfers) == (20, ())


def test_a_shard_of_another_world_size_is_not_used() -> None:
    offers = [sharded(r, shard(20, r, of=4), world=3) for r in range(3)]
    assert decide(offers, floor=-1) is None


def test_a_replicated_state_is_assembled_from_its_pieces_wherever_they_are() -> None:
    pod = {piece(20, 0, 2), piece(20, 1, 2)}
    offers = [replicated(0, *pod), replicated(1)]  # rank 1: a replacement pod
    plan = decide(offers, floor=-1)
    assert plan is not None
    assert plan.needs[1] == (piece(20, 0, 2), piece(20, 1, 2))
    assert plan.transfers == (
        Transfer(piece(20, 0, 2), 0, 1), Transfer(piece(20, 1, 2), 0, 1),
    )  # fmt: skip


def test_a_replicated_state_prefers_the_partition_its_own_pod_holds() -> None:
    offers = [replicated(0, piece(20, 0, 1)), replicated(1, piece(20, 0, 2), piece(20, 1, 2))]
    plan = decide(offers, floor=-1)
    assert plan is not None
    assert plan.transfers == ()
    assert plan.needs == {0: (piece(20, 0, 1),), 1: (piece(20, 0, 2), piece(20, 1, 2))}


def test_an_incomplete_partition_is_not_used() -> None:
    offers = [replicated(0, piece(20, 0, 2)), replicated(1)]
    assert decide(offers, floor=-1) is None


def test_buddies_are_the_same_place_in_the_next_pod() -> None:
    places = [("a", "model"), ("a", "model"), ("b", "model"), ("b", "model"), ("c", "model")]
    assert roles(0, places) == Roles(piece=0, pieces=2, buddy=2, keeps_for=4)
    assert roles(3, places) == Roles(piece=1, pieces=2, buddy=None, keeps_for=1)
    assert roles(4, places) == Roles(piece=0, pieces=1, buddy=0, keeps_for=2)
    assert roles(0, [("a", "model")]) == Roles(0, 1, None, None), "one pod: no buddy"


def test_pieces_split_the_bytes_about_evenly_and_cover_every_tensor() -> None:
    tensors = [torch.zeros(n) for n in (100, 1, 1, 100, 50, 50)]
    bounds = arena.pieces(tensors, 3)
    assert (bounds[0][0], bounds[-1][1]) == (0, len(tensors))
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [sum(t.numel() for t in tensors[lo:hi]) for lo, hi in bounds]
    assert max(sizes) <= 102, sizes


def test_a_state_flattens_and_comes_back_whole() -> None:
    state = {"model": {"w": torch.ones(2, 3)}, "optim": [torch.zeros(1), 5], "step": 7}
    skeleton, tensors = arena.flatten(state)
    entries, size = arena.layout(tensors)
    assert size % arena.ALIGN == 0
    assert entries[1].offset % arena.ALIGN == 0
    buffer = torch.zeros(size, dtype=torch.uint8)
    for target, source in zip(arena.views(buffer, entries), tensors, strict=True):
        target.copy_(source)
    back = arena.unflatten(skeleton, arena.views(buffer, entries))
    assert (back["step"], back["optim"][1]) == (7, 5)
    assert torch.equal(back["model"]["w"], torch.ones(2, 3))
