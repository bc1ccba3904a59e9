"""The reference trainer places every tensor on the device it belongs to (DDP, FSDP2, tensor and
pipeline parallelism; training, async checkpoints and memory snapshots, resuming from storage).

There is no GPU here, so the check is a labelled fake (tests/support/meta_default_device.py): the
workers run with torch's default device set to `meta` while the trainer's own device is the CPU.
A tensor the trainer creates without placing it (no `device=`, no `.to(device)`, a model built
outside `torch.device(devices.device())`) lands on `meta`, and the first gloo collective or CPU
operation that meets it fails: the run dies and the test fails. On a GPU those are exactly the
tensors that would sit on the CPU instead of `cuda:LOCAL_RANK` (or reach an NCCL collective from
the host). Host-side state (the data set, the sampler's generator, the RNG state) must then say
`device="cpu"`, which is the right code for a GPU too.

Why this fake and not another: it catches a forgotten placement wherever it happens, not only in
the collectives a wrapper would watch. DDP, FSDP2, DCP and pipelining run under it unchanged but
for one torch internal (a DTensor's shard offsets, computed without a device), which the fake runs
on the host. What it cannot see, since host and device are both the CPU here: a batch taken from
the host data set and not moved (on a GPU that fails at once, in the first forward pass), and a
flag placed on the compute device for a gloo side group or the other way round (which group
takes which device is `devices.for_group`'s one decision).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from phalanx.resume import devices
from tests.support.gang import kept_trajectory, start_node
from tests.support.meta_default_device import MARK_DIR

FAKE = [sys.executable, "-m", "tests.support.meta_default_device", "phalanx.trainer.train"]
BASE: dict[str, Any] = {"global_batch_size": 6, "micro_batch_size": 2,
                        "checkpoint_interval_steps": 2, "checkpoint_memory_interval_steps": 2}  # fmt: skip
CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "ddp": ({"sharding": "ddp"}, {}),
    "fsdp-bf16": ({"sharding": "fsdp", "mixed_precision": "bf16"}, {}),
    "tp2-fsdp": ({"sharding": "fsdp"}, {"PHALANX_TENSOR_PARALLEL": "2"}),
    "pp2-ddp": ({"sharding": "ddp"}, {"PHALANX_PIPELINE_PARALLEL": "2"}),
}


def run(tmp_path: Path, epoch: int, steps: int, case: str) -> None:
    """A node of two workers under the fake (memory snapshots on: the agent removes their
    directory when it exits, so the next run resumes from storage)."""
    settings, env = CASES[case]
    marks = tmp_path / f"marks-{epoch}"
    marks.mkdir()
    memory = tmp_path / f"memory-{epoch}"
    full_env = {**env, MARK_DIR: str(marks), "PHALANX_CHECKPOINT_MEMORY_DIR": str(memory)}
    trainer = {**BASE, **settings, "steps": steps}
    node = start_node(tmp_path, 2, epoch=epoch, trainer=trainer, env=full_env, command=FAKE)
    assert node.wait(timeout=180) == 0, node.log.read_text()[-4000:]
    assert sorted(p.read_text() for p in marks.iterdir()) == ["meta", "meta"], "the fake is off"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_no_tensor_is_left_off_the_device(tmp_path: Path, case: str) -> None:
    run(tmp_path, 0, 4, case)
    run(tmp_path, 1, 6, case)
    losses, _ = kept_trajectory(tmp_path)
    assert sorted(losses) == list(range(1, 7))
    log = (tmp_path / "log" / "losses.jsonl").read_text()
    assert '"event": "resume", "step": 4, "world": 2, "from": 4, "source": "storage"' in log


@pytest.mark.parametrize(
    ("version", "reusable"),
    [("2.11.0+cu130", False), ("2.11.1", False), ("2.10.0", True), ("2.15.0+cu132", True)],
)
def test_torch_2_11s_stager_is_not_reused(version: str, reusable: bool) -> None:
    """torch 2.11's DefaultStager fails on its second stage (pytorch/pytorch#183413, seen on an
    H200): checkpoints then take a fresh one each."""
    assert devices.stager_reusable(version) is reusable
