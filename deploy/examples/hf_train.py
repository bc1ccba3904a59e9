"""A Hugging Face `Trainer` script as a user writes it: a small GPT-2 built from a config (no
download), trained on CPU with DDP over gloo on random tokens, checkpoints by the Trainer
(`checkpoint-N/`), resumed from the newest. It imports nothing from Phalanx unless asked to
report progress (`--phalanx`: the one-line callback).

Usage: python hf_train.py OUTPUT_DIR STEPS [SECONDS_PER_STEP] [--phalanx]

Launched by Phalanx's agent (or torchrun), the Trainer reads the ranks the launcher set. Rank 0
appends `{"step", "world", "time"}` lines to OUTPUT_DIR/steps.jsonl every step, and
`{"resumed", ...}` at each start.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers.trainer_utils import get_last_checkpoint


class StepLog(TrainerCallback):
    """The script's own record of its steps (for the tests), as train.py keeps one; and, for
    tests on a fast machine, a pause after each step (a step of a real model takes longer)."""

    def __init__(self, path: Path, delay: float) -> None:
        self.path, self.delay = path, delay

    def _write(self, state: object, record: dict[str, int]) -> None:
        if getattr(state, "is_world_process_zero", True):
            with self.path.open("a") as out:
                out.write(json.dumps({**record, "time": time.time()}) + "\n")

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._write(state, {"resumed": state.global_step, "world": args.world_size})

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._write(state, {"step": state.global_step, "world": args.world_size})
        time.sleep(self.delay)


class RandomTokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        tokens = torch.randint(0, 256, (32,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": tokens, "labels": tokens}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root, steps = Path(args[0]), int(args[1])
    delay = float(args[2]) if len(args) > 2 else 0.0
    root.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=256,
                                       n_positions=32))  # fmt: skip
    training = TrainingArguments(
        output_dir=str(root), max_steps=steps, per_device_train_batch_size=4,
        save_steps=10, save_total_limit=2, logging_steps=1, report_to=[], use_cpu=True,
        ddp_backend="gloo", disable_tqdm=True, dataloader_num_workers=0,
    )  # fmt: skip
    callbacks: list[TrainerCallback] = [StepLog(root / "steps.jsonl", delay)]
    if "--phalanx" in sys.argv:
        from phalanx.integrations.huggingface import PhalanxProgress

        callbacks.append(PhalanxProgress())
    trainer = Trainer(model=model, args=training, train_dataset=RandomTokens(), callbacks=callbacks)
    trainer.train(resume_from_checkpoint=get_last_checkpoint(str(root)))


if __name__ == "__main__":
    main()
