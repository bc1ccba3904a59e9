"""`spec.memory`: what a job needs to know whether it fits in GPU memory at each size.

Sharded training (FSDP, ZeRO-2/3, HSDP) puts bigger shards on every GPU when the data-parallel
degree shrinks, so a job that fits at 8 nodes may not at 5. With the GPU's memory and the model's
shape known, the operator never shrinks a job below the smallest size that fits, and refuses one
that fits at no size (see `phalanx.operator.planner.memory`, and `phalanx plan` for the table).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from phalanx.models.base import SpecModel

QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"
"""A Kubernetes memory quantity (`80Gi`, `141G`, `85899345920`), as resources.limits take."""

_UNITS = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}  # fmt: skip

SHARED_MEMORY = "/dev/shm"
"""Where a pod's memory snapshots live: the operator mounts host memory there (a Memory emptyDir),
and the planner checks that a template's own volume there can hold them."""

MemoryPrecision = Literal["fp32", "mixed"]
"""How the model's state is kept: `fp32` (weights, gradients and Adam's two moments in fp32: 4 +
4 + 8 bytes a parameter) or `mixed` (16-bit weights and gradients, fp32 master weights and
moments: 2 + 2 + 12 bytes, the classic mixed-precision Adam accounting)."""

MemorySharding = Literal["ddp", "zero1", "zero2", "zero3", "hsdp"]
"""What data parallelism shards: nothing (DDP), the optimizer state (ZeRO-1), plus gradients
(ZeRO-2, FSDP shard-grad-op), plus weights (ZeRO-3, FSDP full shard), or all three within a pod
only (HSDP: sharded over the pod's ranks, replicated across pods)."""


def quantity_bytes(quantity: str) -> int:
    """Bytes in a Kubernetes memory quantity (`80Gi`); a trailing `B` is allowed (`80GiB`)."""
    text = quantity.strip()
    match = re.fullmatch(QUANTITY_PATTERN, text[:-1] if text.endswith("iB") else text)
    if match is None:
        raise ValueError(f"{quantity!r} is not a memory quantity such as 80Gi, 141G or 80GiB")
    number, unit = match[0][: len(match[0]) - len(match[2] or "")], match[2] or ""
    return int(float(number) * _UNITS[unit])


class ModelDescription(SpecModel):
    """Your own model, described for the memory estimate (the reference trainer's is known)."""

    parameters: Annotated[int, Field(ge=1)]
    """Parameter count of the whole model (all stages, all tensor shards)."""

    layers: Annotated[int, Field(ge=1)]
    """Transformer layers (blocks)."""

    hidden: Annotated[int, Field(ge=1)]
    """Hidden size (the model dimension) of a layer's activations."""

    sequence_length: Annotated[int, Field(ge=1)]
    """Tokens per sample."""

    micro_batch_size: Annotated[int, Field(ge=1)] = 1
    """Samples a rank puts through one forward pass."""

    precision: MemoryPrecision = "mixed"
    """fp32, or mixed (16-bit weights and gradients, fp32 master weights and Adam moments)."""

    sharding: MemorySharding = "zero3"
    """What data parallelism shards: ddp, zero1, zero2, zero3 (FSDP full shard) or hsdp."""

    activation_checkpointing: bool = False
    """Whether each layer's activations are recomputed in the backward pass."""


class MemorySettings(SpecModel):
    """GPU memory and model shape: the smallest size the job fits at is its shrink floor."""

    gpu_memory: Annotated[str | None, Field(pattern=QUANTITY_PATTERN, max_length=32)] = None
    """Memory of one GPU (a quantity, e.g. 80Gi). Unset: the least among the nodes that the
    template's nodeSelector admits, from GPU Feature Discovery's labels (nvidia.com/gpu.memory,
    else the GB in nvidia.com/gpu.product), as a floor only (a job that fits nowhere on it is
    not failed); without those, no floor."""

    model: ModelDescription | None = None
    """Your model's shape, when the job does not run the reference trainer (whose shape comes
    from spec.trainer). Without one, no floor."""

    @property
    def gpu_memory_bytes(self) -> int | None:
        return quantity_bytes(self.gpu_memory) if self.gpu_memory is not None else None
