"""An unmodified torchrun-style DDP script: it imports nothing from Phalanx and reads only the
standard variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

It ends the way a gloo script must with torch 2.15 on CPython 3.11: `os._exit(0)` once the process
group is destroyed. Left to the interpreter's teardown, one of gloo's worker threads can still be
releasing the last all-reduce's tensors (which needs the GIL) while the interpreter finalizes, and
torch aborts with "terminate called without an active exception" (SIGABRT, exit 134) after a clean
run; a core dump shows `ProcessGroupGloo::runLoop` in `~AsyncAllreduceWork`, taking the GIL from
`Py_FinalizeEx`. On this 2-core machine, two agents running this test hit it in 6 runs of 60.
"""

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
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
