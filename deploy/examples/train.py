"""A plain torchrun DDP script, as a user would write it (torchrun-script.yaml runs it): it
checkpoints with torch.distributed.checkpoint and resumes from its newest complete checkpoint.
It imports nothing from Phalanx and reads only what torchrun sets (RANK, WORLD_SIZE, ...).

Usage: torchrun ... train.py CHECKPOINT_DIR STEPS [SECONDS_PER_STEP]

Every 10 steps rank 0 appends `{"step", "world", "time"}` lines to CHECKPOINT_DIR/steps.jsonl, and
all ranks save `step-N/` with DCP; `step-N/.metadata` (written last by DCP) marks it complete. On
start it loads the newest complete one, so a restarted gang resumes where it left off. It ends
with `os._exit(0)`, as a gloo script must with torch 2.15 (see plain_ddp.py).
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT_EVERY = 10


def newest_complete(root: Path) -> Path | None:
    done = [p for p in root.glob("step-*") if (p / ".metadata").exists()]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def main() -> None:
    root, steps = Path(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = {"model": model.state_dict(), "step": torch.tensor(0)}
    start = newest_complete(root)
    if start is not None:
        dcp.load(state, checkpoint_id=str(start))
        model.load_state_dict(state["model"])
    step = int(state["step"])
    log = root / "steps.jsonl"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(json.dumps({"resumed": step, "world": world, "time": time.time()}) + "\n")
    while step < steps:
        loss = model(torch.randn(32, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if rank == 0:
            with log.open("a") as out:
                out.write(json.dumps({"step": step, "world": world, "time": time.time()}) + "\n")
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            dcp.save({"model": model.state_dict(), "step": torch.tensor(step)},
                     checkpoint_id=str(root / f"step-{step}"))  # fmt: skip
        time.sleep(delay)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
