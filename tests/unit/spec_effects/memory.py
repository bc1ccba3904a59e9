"""spec.memory's fields: each moves the smallest size the job fits at in GPU memory, which the
planner keeps the job at or above (here: the size of the first epoch when 2 nodes are desired),
or, for a job that fits at no size, fails it at once."""

from __future__ import annotations

from phalanx.models import TrainingJob
from phalanx.operator.planner import Observed
from tests.unit.planner.builders import at, step
from tests.unit.spec_effects.build import Effect, Overrides

MODEL = {
    "parameters": 10**9, "layers": 10, "hidden": 2353, "sequenceLength": 1000,
    "microBatchSize": 1, "precision": "mixed", "sharding": "zero3",
    "activationCheckpointing": False,
}  # fmt: skip
"""Per GPU at 2 nodes: 16 GB of states / 2 + 0.8 GB of activations = 8.8 GB, within the 9 GB
usable of 10G (10 % kept free); each variant below takes it past 9 GB at 2 nodes, not at 3."""

BASE: Overrides = {"replicas.desired": 2, "memory.gpuMemory": "10G", "memory.model": MODEL}


def _first_epoch(job: TrainingJob) -> tuple[str | None, int]:
    """Phase and size of the job after the planner's first look (2 nodes desired)."""
    job, _ = step(job, Observed(), at(0))
    assert job.status is not None
    return job.status.phase, job.status.nodes


def _model(**changes: object) -> Overrides:
    return {**BASE, "memory.model": {**MODEL, **changes}}


def _effect(variant: Overrides, expect: object, baseline: Overrides = BASE) -> Effect:
    return Effect(variant, _first_epoch, expect, baseline)


AT_3 = ("Pending", 3)
"""The first epoch at 3 nodes although 2 are desired: 2 would not fit."""

EFFECTS: dict[str, Effect] = {
    "memory.gpuMemory": _effect({**BASE, "memory.gpuMemory": "8G"}, AT_3),
    "memory.model.parameters": _effect(_model(parameters=12 * 10**8), AT_3),
    "memory.model.layers": _effect(_model(layers=40), AT_3),
    "memory.model.hidden": _effect(_model(hidden=4 * 2353), AT_3),
    "memory.model.sequenceLength": _effect(_model(sequenceLength=4000), AT_3),
    "memory.model.microBatchSize": _effect(_model(microBatchSize=4), AT_3),
    "memory.model.precision": _effect(_model(precision="fp32"), AT_3),  # fp32 activations
    "memory.model.sharding": _effect(_model(sharding="ddp"), ("Failed", 0)),  # 16 GB anywhere
    "memory.model.activationCheckpointing": _effect(
        _model(layers=40, activationCheckpointing=True), ("Pending", 2), _model(layers=40)
    ),
}
