"""A PyTorch Lightning script as a user writes it: DDP on CPU (gloo), a small regression model,
checkpoints by Lightning's own ModelCheckpoint, resumed from its `last.ckpt`. It imports nothing
from Phalanx unless asked to report progress (`--phalanx`: the one-line callback).

Usage: python lightning_train.py CHECKPOINT_DIR STEPS [SECONDS_PER_STEP] [--phalanx]

Launched by Phalanx's agent (or torchrun), it reads the ranks the launcher set: Lightning sees
a torchelastic environment (RANK, LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE) and
does not spawn processes of its own. Rank 0 appends `{"step", "world", "time"}` lines to
CHECKPOINT_DIR/steps.jsonl every step, and `{"resumed", ...}` at each start, as train.py does.
"""

import json
import os
import sys
import time
from pathlib import Path

import lightning
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset


class Regression(lightning.LightningModule):
    def __init__(self, log: Path, delay: float) -> None:
        super().__init__()
        self.net = torch.nn.Linear(16, 1)
        self.log_file, self.delay = log, delay

    def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        time.sleep(self.delay)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def on_train_start(self) -> None:
        self._write({"resumed": self.trainer.global_step, "world": self.trainer.world_size})

    def on_train_batch_end(self, outputs: object, batch: object, index: int) -> None:
        self._write({"step": self.trainer.global_step, "world": self.trainer.world_size})

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def _write(self, record: dict[str, int]) -> None:
        if self.trainer.global_rank == 0:
            with self.log_file.open("a") as out:
                out.write(json.dumps({**record, "time": time.time()}) + "\n")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root, steps = Path(args[0]), int(args[1])
    delay = float(args[2]) if len(args) > 2 else 0.0
    root.mkdir(parents=True, exist_ok=True)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # set by the launcher
    callbacks: list[lightning.Callback] = [
        ModelCheckpoint(dirpath=root, every_n_train_steps=10, save_last=True, save_top_k=1)
    ]
    if "--phalanx" in sys.argv:
        from phalanx.integrations.lightning import PhalanxProgress

        callbacks.append(PhalanxProgress())
    trainer = lightning.Trainer(
        accelerator="cpu",
        strategy="ddp",
        devices=per_node,
        num_nodes=int(os.environ.get("WORLD_SIZE", "1")) // per_node,
        max_steps=steps,
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(100_000, 16), torch.randn(100_000, 1))
    last = root / "last.ckpt"
    trainer.fit(
        Regression(root / "steps.jsonl", delay),
        DataLoader(data, batch_size=32),
        ckpt_path=str(last) if last.exists() else None,
    )


if __name__ == "__main__":
    main()
