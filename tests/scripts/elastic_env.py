"""A third-party elastic script: it reads torchrun's restart count at its first line, as such
scripts do, takes one DDP step and writes its whole environment to `<out>/<restart>-<rank>.json`.

In the first attempt (restart count 0) every rank fails before the step, so every launcher
restarts its workers as a failure restart (torchrun's agents each count one), and the test gets
both attempts' environments. It ends with `os._exit` once the process
group is destroyed, for the reason `plain_ddp.py` gives.
"""

import json
import os
import sys
from pathlib import Path

RESTART = int(os.environ["TORCHELASTIC_RESTART_COUNT"])

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    rank = int(os.environ["RANK"])
    (out / f"{RESTART}-{rank}.json").write_text(json.dumps(dict(os.environ), sort_keys=True))
    if RESTART == 0:
        os._exit(3)  # the program's own failure: the launchers restart their workers
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    model(torch.ones(2, 4)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
