"""A resize is invisible to the training trajectory (real processes, gloo on CPU, deterministic).

Reference: 4 ranks, 60 steps, uninterrupted. Resized: a rank is SIGKILLed at step 25 and at step
45; the job resumes from the newest checkpoint at world size 3, then 4 (for TP=2: 4 -> 2 -> 4 ranks,
the tensor group kept whole; for PP=2 likewise, the pipeline of two stages kept whole, so a resize
changes the data-parallel degree only). From the first resumed step on, every step's loss matches the
reference within 1e-4, and every sample is used exactly once per data epoch in both runs.
The global batch (10) does not divide 3 or 4 ranks evenly: the loss weighting is exercised. A data
epoch is 15 steps, so both resumes land inside one (steps 20 and 40, by the checkpoints every 10).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.gang import check_exactly_once, kept_trajectory, run_until_step, start_node

STEPS = 60  # four data epochs
GLOBAL_BATCH = 10
DATASET = 150
TRAINER: dict[str, Any] = {"steps": STEPS, "global_batch_size": GLOBAL_BATCH, "micro_batch_size": 2, "checkpoint_interval_steps": 10,
           "dataset_samples": DATASET, "learning_rate": 0.003}  # fmt: skip
CASES = {
    "ddp": ({"sharding": "ddp"}, {}, (4, 3, 4)),
    "fsdp-full-shard": ({"sharding": "fsdp"}, {}, (4, 3, 4)),
    "tp2-fsdp": ({"sharding": "fsdp"}, {"PHALANX_TENSOR_PARALLEL": "2"}, (4, 2, 4)),
    "pp2-ddp": ({"sharding": "ddp"}, {"PHALANX_PIPELINE_PARALLEL": "2"}, (4, 2, 4)),
}


def run(
    workdir: Path, worlds: tuple[int, ...], settings: dict[str, Any], env: dict[str, str]
) -> None:
    """Run to the end, SIGKILLing a rank at steps 25 and 45 and resuming at the next world size."""
    kill_at = [25, 45][: len(worlds) - 1]
    for epoch, world in enumerate(worlds):
        node = start_node(workdir, world, epoch=epoch, trainer={**TRAINER, **settings}, env=env)
        if epoch < len(kill_at):
            run_until_step(node, workdir, kill_at[epoch])
            node.kill_a_worker()
            assert node.wait() != 0
        else:
            assert node.wait(timeout=300) == 0, node.log.read_text()[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_resized_run_matches_the_uninterrupted_run(tmp_path: Path, case: str) -> None:
    settings, env, worlds = CASES[case]
    run(tmp_path / "reference", (worlds[0],), settings, env)
    run(tmp_path / "resized", worlds, settings, env)

    reference, reference_samples = kept_trajectory(tmp_path / "reference")
    resized, resized_samples = kept_trajectory(tmp_path / "resized")
    assert sorted(reference) == sorted(resized) == list(range(1, STEPS + 1))
    worst = max(abs(reference[s] - resized[s]) for s in reference)
    assert worst <= 1e-4, f"largest loss difference {worst:.2e}"
    assert reference[STEPS] < reference[1], "the model did not learn"
    check_exactly_once(reference_samples, DATASET, GLOBAL_BATCH, STEPS)
    check_exactly_once(resized_samples, DATASET, GLOBAL_BATCH, STEPS)
