"""An unmodified torchrun-style DDP script: it imports nothing from Phalanx and reads only the
standard variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                            rank=rank, world_size=world)  # fmt: skip
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    total = torch.tensor([rank])
    dist.all_reduce(total)
    Path(sys.argv[1], f"rank-{rank}").write_text(
        f"{world} {os.environ['LOCAL_RANK']} {int(total.item())}\n"
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
