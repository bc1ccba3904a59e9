"""A DeepSpeed ZeRO script as a user writes it: ZeRO stage 2 on CPU (gloo), a small regression
model, DeepSpeed's own sharded checkpoints (`engine.save_checkpoint`, resumed with
`engine.load_checkpoint` from the `latest` tag DeepSpeed writes once a save is complete). It
imports nothing from Phalanx and reads the ranks its launcher set (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as it would under `deepspeed` or torchrun.

Usage: python deepspeed_train.py CHECKPOINT_DIR STEPS [SECONDS_PER_STEP]

Rank 0 appends `{"resumed", "world", "time"}` at each start and `{"step", "world", "time"}`
after each step to CHECKPOINT_DIR/steps.jsonl, as train.py does.

On a machine without GPUs DeepSpeed picks its CPU accelerator, whose communication backend
compiles a shared-memory all-reduce op (for inference) with a C++ compiler when it starts; the
image here has none, so the script marks that op unavailable first (DeepSpeed then uses
torch.distributed's gloo for everything). With a compiler in the image, drop those two lines.
"""

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed
import deepspeed.ops
import torch
import torch.distributed as dist

CHECKPOINT_EVERY = 10
CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
    "zero_optimization": {"stage": 2},
    "steps_per_print": 1_000_000,
}


def main() -> None:
    root, steps = Path(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    root.mkdir(parents=True, exist_ok=True)
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # no compiler (see above)
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=CONFIG
    )
    step = 0
    if (root / "latest").exists():
        _, client = engine.load_checkpoint(str(root))
        step = int(client["step"])
    log(root, rank, {"resumed": step, "world": world})
    weights = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
    while step < steps:
        data = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(4, 16, generator=data)
        loss = torch.nn.functional.mse_loss(engine(x), x @ weights)
        engine.backward(loss)
        engine.step()
        step += 1
        log(root, rank, {"step": step, "world": world})
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            engine.save_checkpoint(str(root), tag=f"step{step}", client_state={"step": step})
        time.sleep(delay)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as a gloo script must with torch 2.15 (see train.py)


def log(root: Path, rank: int, record: dict[str, int]) -> None:
    if rank == 0:
        with (root / "steps.jsonl").open("a") as out:
            out.write(json.dumps({**record, "time": time.time()}) + "\n")


if __name__ == "__main__":
    main()
