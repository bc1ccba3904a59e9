"""PyTorch Lightning: `Trainer(callbacks=[PhalanxProgress()])` and the job reports its progress.

    from phalanx.integrations.lightning import PhalanxProgress
    trainer = L.Trainer(..., callbacks=[PhalanxProgress()])

Each optimizer step (Lightning's `global_step`) is reported with the batch's loss and the
samples the whole job put through it (the batch size x the data-parallel ranks x gradient
accumulation); a checkpoint Lightning wrote (its ModelCheckpoint) is reported once it exists on
disk, at the next step. Every rank runs the hooks; `phalanx.progress` writes from global rank 0.
Outside a Phalanx pod it does nothing.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from phalanx import progress

try:  # the package `lightning`, else the older standalone `pytorch_lightning`
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - depends on what the image has
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]


STEP_IN_NAME = re.compile(r"step=(\d+)")
"""ModelCheckpoint's default file name, `epoch=E-step=N.ckpt`."""


def _loss(outputs: Any) -> float | None:
    value: Any = outputs.get("loss") if isinstance(outputs, dict) else outputs
    try:
        return float(value.detach() if hasattr(value, "detach") else value)
    except (TypeError, ValueError):
        return None


def _batch_size(batch: Any) -> int | None:
    """The leading dimension of the batch's first tensor."""
    while isinstance(batch, (list, tuple, dict)) and batch:
        batch = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape else None


def _total(trainer: Any) -> int | None:
    """The optimizer steps the Trainer will take: `max_steps` when set, else its estimate from
    the epochs and the loader's length (None when it cannot tell: an iterable of unknown
    length)."""
    if int(getattr(trainer, "max_steps", -1) or -1) > 0:
        return int(trainer.max_steps)
    try:
        estimate = float(trainer.estimated_stepping_batches)
    except Exception:  # Lightning raises when the loader has no length
        return None
    return int(estimate) if math.isfinite(estimate) and estimate > 0 else None


class PhalanxProgress(Callback):
    """Reports every optimizer step and every checkpoint Lightning saves to Phalanx."""

    def __init__(self) -> None:
        super().__init__()
        self._step = -1
        self._checkpoint: tuple[str, int] | None = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        progress.phase("first-step")

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = int(trainer.global_step)
        if step == self._step or step == 0:
            return  # an accumulation micro-batch: no optimizer step yet
        self._step = step
        size = _batch_size(batch)
        samples = None
        if size is not None:
            ranks = int(getattr(trainer, "world_size", 1) or 1)
            samples = size * ranks * int(trainer.accumulate_grad_batches or 1)
        progress.report(step, loss=_loss(outputs), samples=samples, total_steps=_total(trainer))
        self._report_checkpoint(trainer)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._report_checkpoint(trainer)

    def _report_checkpoint(self, trainer: Any) -> None:
        """A checkpoint ModelCheckpoint saved since the last look (it runs after this callback,
        so a save of step N is seen at step N + 1, complete: its saves are synchronous). The
        step is read from the file's name (`...step=N.ckpt`) where it has one."""
        saver = getattr(trainer, "checkpoint_callback", None)
        for name in (getattr(saver, "best_model_path", ""), getattr(saver, "last_model_path", "")):
            path = Path(name) if name else None
            if path is None or not path.is_file():
                continue
            seen = (name, path.stat().st_mtime_ns)
            if seen == self._checkpoint:
                return
            self._checkpoint = seen
            found = STEP_IN_NAME.search(path.name)
            progress.checkpoint(int(found[1]) if found else int(trainer.global_step), name)
            return
