"""The planner's memory model against what the reference trainer really holds per rank.

Real gloo processes (tests/scripts/memory_probe.py) build the reference trainer's model at its
defaults, wrap it as the trainer does and run a step with AdamW, for DDP, FSDP shard-grad-op and
FSDP full shard at 2, 3 and 4 ranks. The rank that holds the most (shards of an uneven split
differ by a row) must match the estimate within 5 % for each of weights, gradients and optimizer
state. Weights are what the rank holds through the step: at rest, or, for shard-grad-op, which
keeps them unsharded from the forward to the backward pass (ZeRO-2 shards gradients and
optimizer state only), right after the forward pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.jobs import job_model
from phalanx.models import TrainingJob
from phalanx.operator.planner import memory
from phalanx.trainer.config import TrainerConfig
from phalanx.trainer.model import ModelConfig, TinyLM

PROBE = Path(__file__).resolve().parents[1] / "scripts" / "memory_probe.py"
TOLERANCE = 0.05


def job(sharding: str) -> TrainingJob:
    return job_model(replicas={"min": 1}, trainer={"sharding": sharding})


def test_the_reference_model_in_the_planner_is_the_trainers() -> None:
    config = TrainerConfig()
    reference = memory.REFERENCE
    assert (reference.vocab, reference.seq_len, reference.dim, reference.layers) == (
        config.vocab, config.seq_len, config.dim, config.layers,
    )  # fmt: skip
    assert (reference.hidden, reference.micro_batch_size) == (
        config.hidden,
        config.micro_batch_size,
    )
    model = TinyLM(ModelConfig(config.vocab, config.seq_len, config.dim, config.heads,
                               config.layers, config.hidden))  # fmt: skip
    assert reference.parameters == sum(p.numel() for p in model.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3, 4])
def test_estimated_weights_gradients_and_optimizer_state_match_what_each_rank_holds(
    tmp_path: Path, world: int
) -> None:
    out = tmp_path / "measured.json"
    subprocess.run([sys.executable, str(PROBE), str(world), str(out)], check=True, timeout=240)
    ranks: list[dict[str, dict[str, int]]] = json.loads(out.read_text())
    report: list[str] = []
    for sharding in ("ddp", "fsdp-grad-op", "fsdp"):
        spec = job(sharding).spec
        model = memory.model_of(spec)
        assert model is not None
        row = memory.estimate(spec, model, world)  # world pods of one process each
        held: dict[str, Any] = {
            "weights": max(max(r[sharding]["weightsAtRest"], r[sharding]["weightsInStep"])
                           for r in ranks),
            "gradients": max(r[sharding]["gradients"] for r in ranks),
            "optimizer": max(r[sharding]["optimizer"] for r in ranks),
            "host_snapshots": max(r[sharding]["snapshots"] for r in ranks),
        }  # fmt: skip
        for part, measured in held.items():
            estimated = getattr(row, part)
            error = (estimated - measured) / measured
            report.append(f"{sharding} {part}: estimated {estimated}, held {measured}")
            assert abs(error) <= TOLERANCE, f"{error:+.1%}:\n" + "\n".join(report)
