"""The ranks' agreement on which memory snapshot to load, run by two real gloo processes, one
pod each: a sharded job whose rank was killed while writing its newest snapshot resumes from the
step before (every rank still holds it), not from storage; a lost pod's replacement gets its
shard from the copy its buddy kept (sharded) or the state from its peer (replicated), sent as
tensors; with neither, storage for all. Each rank records what it loaded in a JSON file the
test reads."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor
from torch.multiprocessing.spawn import spawn

from phalanx.resume.memory import MemorySnapshots

WORLD = 2


class State:
    """A stateful whose tensor is sharded over the ranks (a DTensor) or replicated (plain)."""

    def __init__(self, sharded: bool) -> None:
        full = torch.zeros(8)
        if sharded:
            mesh = init_device_mesh("cpu", (WORLD,))
            self.weights: torch.Tensor = distribute_tensor(full, mesh, [Shard(0)])
        else:
            self.weights = full

    def state_dict(self) -> dict[str, Any]:
        return {"w": self.weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        assert state["w"] is self.weights  # restore_into copied the values in place


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _rank(rank: int, port: int, root: str, sharded: bool, steps: list[int],
          lost: dict[str, list[int]]) -> None:  # fmt: skip
    """Snapshots of `steps` on both ranks; then what a failure left: `lost["torn"]`, the steps
    rank 1 was killed writing (its own slot torn, so its buddy never got that copy);
    `lost["pod"]`, the ranks whose pod was lost (a replacement's empty directory);
    `lost["kept"]`, the ranks whose kept copies are gone too."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        directory = Path(root) / f"pod-{rank}"
        directory.mkdir()
        memory = MemorySnapshots(directory, interval_steps=1, local_rank=0)
        live = State(sharded)
        for step in steps:
            memory.wait_staged()
            with torch.no_grad():
                _local(live.weights).fill_(float(step) + rank / 10)
            memory.maybe_save(step, live)
        memory.close()
        for step in lost.get("torn", []):
            slots = memory.own_slots() if rank == 1 else memory.kept_slots()
            for slot in slots:
                header = slot.header()
                if header is not None and header.unit.step == step:
                    slot.invalidate()
        if rank in lost.get("pod", []):
            for path in directory.iterdir():
                path.unlink()
        if rank in lost.get("kept", []):
            for slot in memory.kept_slots():
                slot.invalidate()
        dist.barrier()
        fresh = State(sharded)
        resumed = memory.load(fresh, storage_step=0)
        loaded = _local(fresh.weights)
        outcome = {"step": resumed, "source": memory.source, "value": round(float(loaded[0]), 3)}
        (Path(root) / f"rank-{rank}.json").write_text(json.dumps(outcome))
    finally:
        dist.destroy_process_group()


def agree(
    tmp_path: Path, *, sharded: bool, steps: list[int], **lost: list[int]
) -> list[dict[str, Any]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = (port, str(tmp_path), sharded, steps, lost)
    spawn(_rank, args=args, nprocs=WORLD, join=True)  # type: ignore[no-untyped-call]
    return [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.timeout(120)
def test_a_sharded_rank_killed_mid_write_resumes_every_rank_from_the_step_before(
    tmp_path: Path,
) -> None:
    outcomes = agree(tmp_path, sharded=True, steps=[1, 2, 3], torn=[3])
    assert outcomes == [
        {"step": 2, "source": "memory", "value": 2.0},
        {"step": 2, "source": "memory", "value": 2.1},
    ]


@pytest.mark.timeout(120)
def test_a_lost_pods_shard_comes_from_the_copy_its_buddy_kept(tmp_path: Path) -> None:
    outcomes = agree(tmp_path, sharded=True, steps=[1, 2, 3], pod=[1])
    assert outcomes == [
        {"step": 3, "source": "peer", "value": 3.0},
        {"step": 3, "source": "peer", "value": 3.1},
    ], "rank 1's own shard of step 3, sent by rank 0"
    assert sorted(p.name for p in (tmp_path / "pod-0").iterdir()) == [
        "local-0-keeps.0.bin", "local-0-keeps.0.meta", "local-0-keeps.1.bin",
        "local-0-keeps.1.meta", "local-0.0.bin", "local-0.0.meta", "local-0.1.bin",
        "local-0.1.meta",
    ], "two slots of its own, two of its buddy's, no temporaries"  # fmt: skip


@pytest.mark.timeout(120)
def test_a_sharded_rank_with_no_copy_anywhere_means_storage_for_all(tmp_path: Path) -> None:
    outcomes = agree(tmp_path, sharded=True, steps=[1, 2, 3], pod=[1], kept=[0])
    assert [o["step"] for o in outcomes] == [None, None]


@pytest.mark.timeout(120)
def test_a_replicated_state_for_a_lost_pod_comes_from_its_peer(tmp_path: Path) -> None:
    outcomes = agree(tmp_path, sharded=False, steps=[1, 2, 3], pod=[1])
    assert outcomes == [{"step": 3, "source": "peer", "value": 3.0}] * WORLD
    assert sorted(p.name for p in (tmp_path / "pod-0").iterdir()) == [
        "local-0.0.bin", "local-0.0.meta", "local-0.1.bin", "local-0.1.meta",
    ], "a replicated state keeps no buddy copy: every pod holds it"  # fmt: skip
