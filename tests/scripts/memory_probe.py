"""What one rank of the reference trainer holds, by part, under each data-parallel strategy: for
tests/trainer/test_memory_estimate.py, which compares it with the planner's memory model.

Usage: python memory_probe.py WORLD OUT.json. Spawns WORLD gloo processes on this machine (one
pod of WORLD ranks); each builds the reference trainer's model at its defaults, wraps it as the
trainer does (phalanx.trainer.parallel), runs one step with AdamW and records, in bytes of its
own shard: the weights at rest and right after the forward pass (FSDP shard-grad-op keeps them
unsharded from the forward to the backward), the gradients after the backward pass, and the
optimizer state after the step, and the host memory its pod's directory holds once two memory
snapshots are taken (each rank a pod of its own, as the planner's estimate at WORLD pods of one
process assumes). Rank r writes OUT.json's entry r.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from phalanx.resume import devices
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.state import AppState, TrainingProgress
from phalanx.trainer import parallel
from phalanx.trainer.config import TrainerConfig
from phalanx.trainer.model import ModelConfig, TinyLM, sample_losses

STRATEGIES: tuple[parallel.Sharding, ...] = ("ddp", "fsdp-grad-op", "fsdp")


def local_bytes(tensor: torch.Tensor) -> int:
    """Bytes of this rank's part of `tensor` (its shard, for a DTensor)."""
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def measure(sharding: parallel.Sharding, world: int, pod: Path) -> dict[str, int]:
    config = TrainerConfig()
    torch.manual_seed(config.seed)
    shape = ModelConfig(
        config.vocab, config.seq_len, config.dim, config.heads, config.layers, config.hidden
    )
    with torch.device(devices.device()):
        model = parallel.parallelize(TinyLM(shape), sharding, "none", False, 1, world)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    at_rest = sum(local_bytes(p) for p in model.parameters())
    batch = torch.randint(config.vocab, (config.micro_batch_size, config.seq_len))
    loss = sample_losses(model(batch[:, :-1]), batch[:, 1:]).mean()
    in_step = sum(local_bytes(p) for p in model.parameters())
    loss.backward()  # type: ignore[no-untyped-call]
    gradients = sum(local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    optimizer.step()
    state = sum(
        local_bytes(value)
        for per_parameter in optimizer.state.values()
        for value in per_parameter.values()
        if isinstance(value, torch.Tensor)
    )
    pod.mkdir(parents=True)
    snapshots = MemorySnapshots(pod, interval_steps=1, local_rank=0)
    for step in (1, 2):  # both slots
        snapshots.maybe_save(step, AppState(model, optimizer, TrainingProgress()))
        snapshots.wait()
    snapshots.close()
    return {"weightsAtRest": at_rest, "weightsInStep": in_step, "gradients": gradients,
            "optimizer": state, "snapshots": sum(f.stat().st_size for f in pod.glob("*.bin"))}  # fmt: skip


def worker(rank: int, world: int, port: int, out: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    pods = Path(f"{out}.pods")
    measured = {s: measure(s, world, pods / s / f"pod-{rank}") for s in STRATEGIES}
    Path(f"{out}.{rank}").write_text(json.dumps(measured))
    dist.destroy_process_group()


def main() -> None:
    world, out = int(sys.argv[1]), sys.argv[2]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.spawn(worker, args=(world, port, out), nprocs=world)  # type: ignore[attr-defined,no-untyped-call]
    ranks = [json.loads(Path(f"{out}.{r}").read_text()) for r in range(world)]
    Path(out).write_text(json.dumps(ranks))


if __name__ == "__main__":
    main()
