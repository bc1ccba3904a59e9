"""The Hugging Face `Trainer`: `Trainer(..., callbacks=[PhalanxProgress()])` and the job reports
its progress.

    from phalanx.integrations.huggingface import PhalanxProgress
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[PhalanxProgress()])

Each optimizer step (`state.global_step`) is reported with the newest loss the Trainer logged
(every `logging_steps`) and the samples the whole job put through it (per-device batch x the
data-parallel ranks x gradient accumulation); a checkpoint is reported when the Trainer has saved
it (`on_save` runs after `checkpoint-N/` is written). Every rank runs the hooks;
`phalanx.progress` writes from global rank 0. Outside a Phalanx pod it does nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from phalanx import progress


class PhalanxProgress(TrainerCallback):
    """Reports every optimizer step and every saved checkpoint to Phalanx."""

    def __init__(self) -> None:
        self._loss: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        progress.phase("first-step")

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any
    ) -> None:
        if logs and isinstance(logs.get("loss"), (int, float)):
            self._loss = float(logs["loss"])

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        ranks = max(int(getattr(args, "world_size", 1) or 1), 1)
        samples = args.per_device_train_batch_size * ranks * args.gradient_accumulation_steps
        total = int(getattr(state, "max_steps", 0) or 0) or None  # the Trainer computes it
        progress.report(int(state.global_step), loss=self._loss, samples=samples, total_steps=total)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        path = Path(args.output_dir, f"checkpoint-{state.global_step}")
        if path.is_dir():
            progress.checkpoint(int(state.global_step), str(path))
