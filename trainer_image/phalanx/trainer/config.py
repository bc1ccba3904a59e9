"""The reference trainer's settings: `PHALANX_TRAINER_*` env variables or `--flags`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from phalanx.trainer.parallel import Precision, Sharding


class TrainerConfig(BaseSettings):
    """What the reference trainer trains and how. The operator maps `spec.trainer` onto these;
    the checkpoint cadence is the resume library's (`phalanx.resume.settings`), as for any
    script that uses it."""

    model_config = SettingsConfigDict(
        env_prefix="PHALANX_TRAINER_",
        cli_kebab_case=True,
        frozen=True,
        use_attribute_docstrings=True,
    )

    steps: Annotated[int, Field(ge=1)] = 100
    """Optimizer steps to train for."""
    global_batch_size: Annotated[int, Field(ge=1)] = 10
    """Samples per optimizer step, the same at every world size."""
    micro_batch_size: Annotated[int, Field(ge=1)] = 4
    """Most samples a rank puts through one forward pass; more means gradient accumulation."""
    sharding: Sharding = "ddp"
    """ddp, fsdp (full shard), fsdp-grad-op (shard grads and optimizer state), or hsdp."""
    mixed_precision: Precision = "none"
    """none, bf16, or fp16 (with dynamic loss scaling)."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass."""
    seed: Annotated[int, Field(ge=0)] = 0
    """Seed of model initialisation and data order."""
    learning_rate: Annotated[float, Field(gt=0)] = 3e-3
    """AdamW learning rate."""
    dataset_samples: Annotated[int, Field(ge=1)] = 240
    """Size of the synthetic data set."""
    seq_len: Annotated[int, Field(ge=2)] = 16
    vocab: Annotated[int, Field(ge=2)] = 64
    dim: Annotated[int, Field(ge=8)] = 64
    heads: Annotated[int, Field(ge=1)] = 4
    layers: Annotated[int, Field(ge=1)] = 2
    hidden: Annotated[int, Field(ge=8)] = 128
    log_dir: Path | None = None
    """Where to append losses.jsonl and samples-<rank>.jsonl (for trajectory checks)."""
    final_save_delay_seconds: Annotated[float, Field(ge=0)] = 0.0
    """Emulated slow storage for the final save: it blocks this much longer before it is
    made (a large model on a slow volume), reported as a save in progress like the save
    itself (tests: a long final save is no hang)."""
    step_delay_seconds: Annotated[float, Field(ge=0)] = 0.0
    """Emulated compute after each step, as if the model were bigger (demos: a run long enough to
    watch and to interrupt). It is this rank's own work: a node with less CPU does it more slowly
    and shows as a straggler (`phalanx.trainer.emulated`)."""
