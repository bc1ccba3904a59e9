"""A resharded load next to a same-size load: one FSDP2-sharded checkpoint saved by 4 ranks, then
loaded by 3 ranks (what a job that lost a node does) and by 4 (what a job restarted at its own size
does), alternately, so both see the same disk and page cache.

Why it matters: closing ranks resumes at a new world size, and a checkpoint format that needs an
offline conversion or a gather on one rank would make that restart slow. DCP reads each rank's
new shard straight from the saved ones; this measures what that costs against a plain load.

Each load is timed on every rank from a barrier to its end; the slowest rank is the load's time.
Ranks are processes on this machine, gloo over loopback (no GPU).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.multiprocessing.spawn import ProcessExitedException, start_processes

from harness.controlplane import free_port
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.state import AppState, TrainingProgress
from phalanx.trainer.model import ModelConfig, TinyLM
from phalanx.trainer.parallel import fully_shard_model


def _sharded_state(config: ModelConfig) -> AppState:
    """The model and AdamW state, FSDP2-sharded over every rank of the default group."""
    torch.manual_seed(0)
    model = TinyLM(config)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    fully_shard_model(model, mesh, reshard=True, precision="none")
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 8, dtype=torch.long)).sum().backward()
    optimizer.step()  # optimizer state exists, as in training
    return AppState(model, optimizer, TrainingProgress())


def _rank(rank: int, world: int, port: int, directory: str, config: ModelConfig,
          save: bool, repeats: int, out: Any) -> None:  # fmt: skip
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        state = _sharded_state(config)
        manager = CheckpointManager(directory, keep=1, async_save=False)
        if save:
            manager.save(1, {"app": state}, blocking=True)
            return
        times = []
        for _ in range(repeats):
            dist.barrier()
            started = time.perf_counter()
            step = manager.load_latest({"app": state})
            elapsed = torch.tensor([time.perf_counter() - started])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            assert step == 1, f"rank {rank} loaded step {step}, not the saved step 1"
            times.append(float(elapsed))
        if rank == 0:
            out.put(times)
        dist.barrier()  # no rank tears its connections down while a peer still uses them
    finally:
        dist.destroy_process_group()


def _run(world: int, directory: str, config: ModelConfig, *, save: bool, repeats: int = 1) -> list[float]:  # fmt: skip
    """The slowest rank's load times (or nothing, for the save). A rank that aborts in gloo's
    teardown after every load was timed and rank 0 handed the times over (seen once at
    dbe1bb4: "terminate called without an active exception", SIGABRT) lost nothing measured:
    its times are kept and the abort is said; an abort before that fails the benchmark."""
    context = mp.get_context("spawn")
    out = context.SimpleQueue()
    try:
        start_processes(_rank, args=(world, free_port(), directory, config, save, repeats, out),
                        nprocs=world, start_method="spawn")  # fmt: skip
    except ProcessExitedException as error:
        if save or out.empty():
            raise
        print(
            f"bench.recovery.reshard: a rank ended abnormally after its loads were timed: {error}"
        )
    return [] if save else list(out.get())


def measure(config: ModelConfig, saved_by: int = 4, resharded_to: int = 3, repeats: int = 3) -> dict[str, float]:  # fmt: skip
    """Median seconds of a load at `resharded_to` ranks and at `saved_by` ranks, and the size."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        _run(saved_by, tmp, config, save=True)
        size_mib = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()) / 2**20
        resharded, same = [], []
        for _ in range(repeats):  # alternating, so neither always reads a warmer cache
            resharded += _run(resharded_to, tmp, config, save=False)
            same += _run(saved_by, tmp, config, save=False)
    return {
        "saved_by": saved_by, "resharded_to": resharded_to, "size_mib": size_mib,
        "resharded_load": statistics.median(resharded), "same_size_load": statistics.median(same),
    }  # fmt: skip
