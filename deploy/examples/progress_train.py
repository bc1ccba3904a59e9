"""train.py (plain DDP, DCP checkpoints) that tells Phalanx how it goes, with `phalanx.progress`
(progress-script.yaml runs it under the trainer image's agent, `phalanx-agent python ...`).

Usage: phalanx-agent python progress_train.py CHECKPOINT_DIR STEPS [SECONDS_PER_STEP]

What the five calls buy (README, "What each kind of program gets"): `phase` tells the agent where
each worker's start is, so a pod frozen before the first step is found and the phase named;
`report` gives the job its step, loss and throughput, hang detection on the step, and recovery
measured to the first step after a restart; `compute` times each rank's own work, so a slow rank
stands out (`sync_ranks=True`: every rank calls `report`); `checkpoint` names the newest committed
checkpoint in the job's status. Outside a Phalanx pod every call does nothing.

Like train.py, rank 0 appends `{"step", "world", "time"}` lines to CHECKPOINT_DIR/steps.jsonl,
it resumes from the newest `step-N/` whose `.metadata` exists, and it ends with `os._exit(0)`.
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

import phalanx.progress as progress

CHECKPOINT_EVERY = 10
BATCH = 32


def newest_complete(root: Path) -> Path | None:
    done = [p for p in root.glob("step-*") if (p / ".metadata").exists()]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def main() -> None:
    root, steps = Path(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    progress.phase("rendezvous")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = {"model": model.state_dict(), "step": torch.tensor(0)}
    progress.phase("loading")
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
    progress.phase("first-step")
    while step < steps:
        with progress.compute():  # the forward pass: DDP's backward also waits for the peers
            loss = model(torch.randn(BATCH, 16)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        progress.report(step, loss=loss.item(), samples=BATCH * world, sync_ranks=True)
        if rank == 0:
            with log.open("a") as out:
                out.write(json.dumps({"step": step, "world": world, "time": time.time()}) + "\n")
        if step % CHECKPOINT_EVERY == 0 or step == steps:
            path = root / f"step-{step}"
            dcp.save({"model": model.state_dict(), "step": torch.tensor(step)},
                     checkpoint_id=str(path))  # fmt: skip
            progress.checkpoint(step, str(path))  # committed: dcp.save returned on every rank
        time.sleep(delay)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
