"""Every parallelism and precision option of the reference trainer trains and checkpoints: HSDP
across two agents (shard inside a node, replicate across nodes), FSDP2 with bf16, DDP with fp16
and dynamic loss scaling, and FSDP2 shard-grad-op with activation checkpointing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.controlplane import free_port
from phalanx.resume.checkpoint import CheckpointManager
from tests.support.gang import kept_trajectory, start_node

STEPS = 6
BASE: dict[str, Any] = {"steps": STEPS, "global_batch_size": 8, "checkpoint_interval_steps": 3}
CASES = {
    "hsdp-2-nodes": ({"sharding": "hsdp"}, 2),
    "fsdp-bf16": ({"sharding": "fsdp", "mixed_precision": "bf16"}, 1),
    "ddp-fp16-loss-scaling": ({"sharding": "ddp", "mixed_precision": "fp16"}, 1),
    "fsdp-grad-op-activation-checkpointing": (
        {"sharding": "fsdp-grad-op", "activation_checkpointing": "true"},
        1,
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_strategy_trains_and_checkpoints(tmp_path: Path, case: str) -> None:
    settings, nodes = CASES[case]
    port = free_port()
    shared = {
        "PHALANX_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "PHALANX_TRAINER_LOG_DIR": str(tmp_path / "log"),
    }
    agents = [start_node(tmp_path / f"node{r}", 2, epoch=0, trainer={**BASE, **settings}, env=shared,
                         nnodes=nodes, node_rank=r, master_port=port) for r in range(nodes)]  # fmt: skip
    assert [a.wait(timeout=300) for a in agents] == [0] * nodes, agents[0].log.read_text()[-3000:]
    losses, _ = kept_trajectory(tmp_path)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert all(math.isfinite(v) for v in losses.values())
    assert CheckpointManager(str(tmp_path / "checkpoints")).valid_steps()[0] == STEPS
