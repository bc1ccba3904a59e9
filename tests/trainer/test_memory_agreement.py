"""The ranks' agreement on which memory snapshot to load, run by two real gloo processes: a
sharded job whose rank was killed while writing its newest snapshot resumes from the step
before (every rank still holds it), not from storage; a replicated state missing on one rank
comes from its peer; a sharded state missing on one rank means storage for all. Each rank
records what it loaded in a JSON file the test reads."""

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


def _rank(rank: int, port: int, root: str, sharded: bool, saved: list[list[int]]) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        directory = Path(root) / f"pod-{rank}"
        directory.mkdir()
        memory = MemorySnapshots(directory, interval_steps=1, local_rank=0)
        live = State(sharded)
        for step in saved[rank]:
            with torch.no_grad():
                _local(live.weights).fill_(float(step))
            memory.maybe_save(step, live)
            memory.wait()
        fresh = State(sharded)
        resumed = memory.load(fresh, storage_step=0)
        loaded = _local(fresh.weights)
        outcome = {"step": resumed, "source": memory.source, "value": float(loaded[0])}
        (Path(root) / f"rank-{rank}.json").write_text(json.dumps(outcome))
    finally:
        dist.destroy_process_group()


def agree(tmp_path: Path, *, sharded: bool, saved: list[list[int]]) -> list[dict[str, Any]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spawn(_rank, args=(port, str(tmp_path), sharded, saved), nprocs=WORLD, join=True)  # type: ignore[no-untyped-call]
    return [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.timeout(120)
def test_a_sharded_rank_killed_mid_write_resumes_every_rank_from_the_step_before(
    tmp_path: Path,
) -> None:
    outcomes = agree(tmp_path, sharded=True, saved=[[1, 2, 3], [1, 2]])
    assert outcomes == [{"step": 2, "source": "memory", "value": 2.0}] * WORLD
    assert {p.name for p in (tmp_path / "pod-0").iterdir()} == {
        "local-0.pt",
        "local-0.prev.pt",
    }, "a sharded rank keeps its newest snapshot and the one before, no temporaries"


@pytest.mark.timeout(120)
def test_a_sharded_rank_with_no_common_step_means_storage_for_all(tmp_path: Path) -> None:
    outcomes = agree(tmp_path, sharded=True, saved=[[1, 2, 3], []])
    assert [o["step"] for o in outcomes] == [None, None]


@pytest.mark.timeout(120)
def test_a_replicated_state_missing_on_one_rank_comes_from_its_peer(tmp_path: Path) -> None:
    outcomes = agree(tmp_path, sharded=False, saved=[[1, 2, 3], [1, 2]])
    assert outcomes == [{"step": 3, "source": "peer", "value": 3.0}] * WORLD
    assert [p.name for p in (tmp_path / "pod-0").iterdir()] == ["local-0.pt"], (
        "a replicated state keeps one snapshot"
    )
