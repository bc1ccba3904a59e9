"""A user's plain DDP script made resumable with `phalanx.resume` (python-script.yaml runs it).

It is train.py beside this file, converted: the lines marked `# phalanx.resume` are the whole
change. What it gains: a restart at any world size continues from the very next sample (every
sample once, the global batch the same), from the newest valid checkpoint resharded to the new
world (or from its pod's memory after an in-place restart), saving in the background at the
cadence of the job's `spec.checkpoint`, into its directory, and reporting its steps and
checkpoints to the job's status. Under torchrun or outside Phalanx the same script runs and
checkpoints into ./checkpoints.

Usage: python resumable_train.py STEPS [SECONDS_PER_STEP]

Rank 0 appends `{"resumed", "world", "time"}` on start and `{"step", "loss", "world", "time"}`
after each step to `<checkpoint dir>/steps.jsonl`; every rank appends the sample ids it trained
on to `samples-<rank>.jsonl` there (what the trajectory test checks: every sample once).
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from phalanx.resume import Resumable  # phalanx.resume

DATASET = 240
GLOBAL_BATCH = 12  # the whole job's batch at any world size (3 or 4 ranks: 4 or 3 samples each)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression data set (no download): y = x . w + noise."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(DATASET, 16, generator=generator)
    w = torch.randn(16, 1, generator=generator)
    return x, x @ w + 0.1 * torch.randn(DATASET, 1, generator=generator)


def main() -> None:
    steps = int(sys.argv[1])
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    x, y = data()
    # phalanx.resume: the job's sampler, checkpoints and cadence around the model and optimizer
    run = Resumable(model, optimizer, dataset_size=DATASET, global_batch=GLOBAL_BATCH)
    run.resume()  # phalanx.resume
    root = Path(run.settings.location)  # the job's spec.checkpoint.dir
    log(root, rank, {"resumed": run.step, "world": world, "time": time.time()})
    while run.step < steps:  # phalanx.resume
        ids = run.batch()  # phalanx.resume: this rank's share of the next global batch
        loss = torch.nn.functional.mse_loss(model(x[ids]), y[ids])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)  # the global batch's loss: every rank's share is the same size
        step, position, loss_value = run.step + 1, run.position, float(mean) / world
        log(root, rank, {"step": step, "loss": loss_value, "world": world, "time": time.time()})
        log(root, rank, {"step": step, "position": position, "ids": ids, "dp_rank": rank,
                         "epoch": int(os.environ.get("PHALANX_EPOCH", "0"))},
            f"samples-{rank}.jsonl")  # fmt: skip
        run.step_done(loss_value)  # phalanx.resume: counts, saves on the spec's cadence, reports
        time.sleep(delay)
    run.finish()  # phalanx.resume: the last checkpoint, committed
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as a gloo script must with torch 2.15 (see train.py)


def log(root: Path, rank: int, record: dict[str, object], name: str = "steps.jsonl") -> None:
    if rank != 0 and name == "steps.jsonl":
        return
    root.mkdir(parents=True, exist_ok=True)
    with (root / name).open("a") as out:
        out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
