"""A torchrun elastic script as PyTorch's fault-tolerance tutorial teaches it: launched with
`torchrun --nnodes=MIN:MAX --max-restarts=N --rdzv-backend=c10d ...`, it keeps a *snapshot*
(model state and epochs run) that global rank 0 writes every few epochs and every rank loads on
start, so torchrun's restart of the whole group resumes where it left off. It reads only what
torchrun sets (LOCAL_RANK, RANK, WORLD_SIZE) and imports nothing from Phalanx; under Phalanx's
agent, the agent is the pod's launcher and torchrun's flags give way to the job's spec.

Usage: torchrun ... elastic_train.py SNAPSHOT_DIR EPOCHS [SECONDS_PER_EPOCH]

Global rank 0 appends `{"resumed", "world", "time"}` at each start and `{"step": epoch, "world",
"time"}` after each epoch to SNAPSHOT_DIR/steps.jsonl, as train.py does.
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

SAVE_EVERY = 5  # epochs


class Trainer:
    def __init__(self, model: torch.nn.Module, data: DataLoader, snapshot: Path) -> None:
        self.rank = int(os.environ["RANK"])
        self.model, self.data, self.snapshot = model, data, snapshot
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.epochs_run = 0
        if snapshot.exists():
            self._load_snapshot()
        self.model = DistributedDataParallel(self.model)

    def _load_snapshot(self) -> None:
        state = torch.load(self.snapshot, map_location="cpu")
        self.model.load_state_dict(state["MODEL_STATE"])
        self.epochs_run = state["EPOCHS_RUN"]

    def _save_snapshot(self, epoch: int) -> None:
        state = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}
        partial = self.snapshot.with_suffix(".tmp")
        torch.save(state, partial)
        partial.replace(self.snapshot)  # a restart never loads half a snapshot

    def train(self, epochs: int, delay: float, log: Path) -> None:
        self._log(log, {"resumed": self.epochs_run, "world": dist.get_world_size()})
        for epoch in range(self.epochs_run, epochs):
            sampler = self.data.sampler
            assert isinstance(sampler, DistributedSampler)
            sampler.set_epoch(epoch)
            for x, y in self.data:
                self.optimizer.zero_grad()
                torch.nn.functional.mse_loss(self.model(x), y).backward()
                self.optimizer.step()
            time.sleep(delay)
            self._log(log, {"step": epoch + 1, "world": dist.get_world_size()})
            if self.rank == 0 and ((epoch + 1) % SAVE_EVERY == 0 or epoch + 1 == epochs):
                self._save_snapshot(epoch + 1)

    def _log(self, log: Path, record: dict[str, int]) -> None:
        if self.rank == 0:
            with log.open("a") as out:
                out.write(json.dumps({**record, "time": time.time()}) + "\n")


def main() -> None:
    root, epochs = Path(sys.argv[1]), int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    root.mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x = torch.randn(64, 16)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    Trainer(torch.nn.Linear(16, 1), loader, root / "snapshot.pt").train(
        epochs, delay, root / "steps.jsonl"
    )
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as a gloo script must with torch 2.15 (see train.py)


if __name__ == "__main__":
    main()
