"""Apply the data/tensor parallelism the job asks for: DDP, FSDP2 full shard (ZeRO-3-like),
FSDP2 shard-grad-op (ZeRO-2-like), HSDP (shard inside a pod, replicate across pods), and tensor
parallelism inside a pod (DTensor on a (dp, tp) mesh, FSDP2 over dp); plus mixed precision and
activation checkpointing. Pipeline parallelism builds on these helpers (see pipeline.py).

Every model is built on `devices.device()` before it is wrapped, and every mesh is of that device's
type, so DDP and FSDP2 never move anything behind the trainer's back."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

from phalanx.resume import devices
from phalanx.trainer.model import TinyLM

Sharding = Literal["ddp", "fsdp", "fsdp-grad-op", "hsdp"]
Precision = Literal["none", "bf16", "fp16"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Layout:
    """Where this rank sits: its data-parallel rank among `dp` replicas, its pipeline stage among
    `pp`, and its tensor-parallel rank among `tp`.

    Ranks are laid out as a (dp, pp, tp) grid, tp fastest: one replica's pipeline is `pp x tp`
    consecutive ranks. A resize adds or removes whole pods, so whole pipelines: it changes `dp`
    only, and every rank keeps its stage and its tensor shard.
    """

    dp: int
    dp_rank: int
    tp: int
    tp_rank: int
    pp: int = 1
    pp_rank: int = 0

    @property
    def first_stage(self) -> bool:
        return self.pp_rank == 0

    @property
    def last_stage(self) -> bool:
        return self.pp_rank == self.pp - 1

    @property
    def part(self) -> str:
        """Which part of the model this rank holds (its pipeline stage): what a peer replica
        holding the same part can stand in for."""
        return "model" if self.pp == 1 else f"stage {self.pp_rank} of {self.pp}"


def layout(tensor_parallel: int, pipeline_parallel: int = 1) -> Layout:
    """This rank's place in the job's process group."""
    return grid(dist.get_rank(), dist.get_world_size(), tensor_parallel, pipeline_parallel)


def grid(rank: int, world: int, tensor_parallel: int, pipeline_parallel: int) -> Layout:
    """The place of `rank` among `world` ranks (see `Layout`)."""
    replica = tensor_parallel * pipeline_parallel
    return Layout(
        dp=world // replica,
        dp_rank=rank // replica,
        tp=tensor_parallel,
        tp_rank=rank % tensor_parallel,
        pp=pipeline_parallel,
        pp_rank=rank % replica // tensor_parallel,
    )


def parallelize(
    model: TinyLM, sharding: Sharding, precision: Precision, activation_checkpointing: bool,
    tensor_parallel: int, nproc_per_node: int,
) -> nn.Module:  # fmt: skip
    """Wrap `model` (built on `devices.device()`) for the requested strategy; every rank must
    call this with the same model."""
    if activation_checkpointing:
        checkpoint_blocks(model)
    world, device_type = dist.get_world_size(), devices.device().type
    if tensor_parallel > 1:
        mesh = init_device_mesh(
            device_type, (world // tensor_parallel, tensor_parallel), mesh_dim_names=("dp", "tp")
        )
        tensor_parallelize(model, mesh["tp"])
        return fully_shard_model(
            model, mesh["dp"], reshard=sharding != "fsdp-grad-op", precision=precision
        )
    if sharding == "ddp":
        return replicate(model)
    if sharding == "hsdp":
        mesh = init_device_mesh(
            device_type,
            (world // nproc_per_node, nproc_per_node),
            mesh_dim_names=("replicate", "shard"),
        )
        return fully_shard_model(model, mesh, reshard=True, precision=precision)
    mesh = init_device_mesh(device_type, (world,), mesh_dim_names=("dp",))
    return fully_shard_model(model, mesh, reshard=sharding == "fsdp", precision=precision)


def checkpoint_blocks(model: TinyLM) -> None:
    """Recompute each block's activations in the backward pass."""
    for key in list(model.layers):
        model.layers[key] = checkpoint_wrapper(model.layers[key])


def replicate(model: nn.Module, group: dist.ProcessGroup | None = None) -> nn.Module:
    """DDP over `group` (None: every rank). No `device_ids`: the batches are on the device
    already, and DDP must not move inputs for the trainer (that would hide a misplaced batch)."""
    return DistributedDataParallel(model, process_group=group)


def tensor_parallelize(model: TinyLM, mesh: DeviceMesh) -> None:
    plan = {
        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(),
    }  # fmt: skip
    for block in model.layers.values():
        target = getattr(block, "_checkpoint_wrapped_module", block)
        parallelize_module(target, mesh, plan)


def fully_shard_model(
    model: TinyLM, mesh: DeviceMesh, reshard: bool, precision: Precision
) -> nn.Module:
    policy = (
        MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=torch.float32)
        if precision != "none"
        else MixedPrecisionPolicy()
    )
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model


def autocast(model: nn.Module, precision: Precision) -> contextlib.AbstractContextManager[None]:
    """DDP has no precision policy: run its forward under autocast instead."""
    if precision == "none" or isinstance(model, FSDPModule):
        return contextlib.nullcontext()
    return torch.autocast(devices.device().type, dtype=DTYPES[precision])


def gradient_sync(
    model: nn.Module, last_micro_batch: bool
) -> contextlib.AbstractContextManager[None]:
    """Reduce gradients only on the last micro-batch of an accumulation."""
    if isinstance(model, DistributedDataParallel):
        return contextlib.nullcontext() if last_micro_batch else model.no_sync()
    if isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(last_micro_batch)
    return contextlib.nullcontext()


def grad_scaler(model: nn.Module, precision: Precision) -> Any:
    """Dynamic loss scaling for fp16 (sharded for FSDP2); None otherwise."""
    if precision != "fp16":
        return None
    if isinstance(model, FSDPModule):
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler(devices.device().type)
    return torch.amp.GradScaler(devices.device().type)
