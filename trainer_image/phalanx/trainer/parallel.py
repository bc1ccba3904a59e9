"""Apply the data/tensor parallelism the job asks for: DDP, FSDP2 full shard (ZeRO-3-like),
FSDP2 shard-grad-op (ZeRO-2-like), HSDP (shard inside a pod, replicate across pods), and tensor
parallelism inside a pod (DTensor on a (dp, tp) mesh, FSDP2 over dp); plus mixed precision and
activation checkpointing."""

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

from phalanx.trainer.model import TinyLM

Sharding = Literal["ddp", "fsdp", "fsdp-grad-op", "hsdp"]
Precision = Literal["none", "bf16", "fp16"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Layout:
    """Where this rank sits: its data-parallel rank among `dp` replicas, and the tensor degree."""

    dp: int
    dp_rank: int
    tp: int
    tp_rank: int


def layout(tensor_parallel: int) -> Layout:
    rank, world = dist.get_rank(), dist.get_world_size()
    return Layout(
        dp=world // tensor_parallel,
        dp_rank=rank // tensor_parallel,
        tp=tensor_parallel,
        tp_rank=rank % tensor_parallel,
    )


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def parallelize(
    model: TinyLM, sharding: Sharding, precision: Precision, activation_checkpointing: bool,
    tensor_parallel: int, nproc_per_node: int,
) -> nn.Module:  # fmt: skip
    """Wrap `model` for the requested strategy; every rank must call this with the same model."""
    if activation_checkpointing:
        for index, block in enumerate(model.layers):
            model.layers[index] = checkpoint_wrapper(block)
    world = dist.get_world_size()
    if tensor_parallel > 1:
        mesh = init_device_mesh(
            _device(), (world // tensor_parallel, tensor_parallel), mesh_dim_names=("dp", "tp")
        )
        _tensor_parallel(model, mesh["tp"])
        return _fully_shard(
            model, mesh["dp"], reshard=sharding != "fsdp-grad-op", precision=precision
        )
    if sharding == "ddp":
        return DistributedDataParallel(model)
    if sharding == "hsdp":
        mesh = init_device_mesh(
            _device(),
            (world // nproc_per_node, nproc_per_node),
            mesh_dim_names=("replicate", "shard"),
        )
        return _fully_shard(model, mesh, reshard=True, precision=precision)
    mesh = init_device_mesh(_device(), (world,), mesh_dim_names=("dp",))
    return _fully_shard(model, mesh, reshard=sharding == "fsdp", precision=precision)


def _tensor_parallel(model: TinyLM, mesh: DeviceMesh) -> None:
    plan = {
        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
        "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(),
    }  # fmt: skip
    for block in model.layers:
        target = getattr(block, "_checkpoint_wrapped_module", block)
        parallelize_module(target, mesh, plan)


def _fully_shard(model: TinyLM, mesh: DeviceMesh, reshard: bool, precision: Precision) -> nn.Module:
    policy = (
        MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=torch.float32)
        if precision != "none"
        else MixedPrecisionPolicy()
    )
    for block in model.layers:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return model


def autocast(model: nn.Module, precision: Precision) -> contextlib.AbstractContextManager[None]:
    """DDP has no precision policy: run its forward under autocast instead."""
    if precision == "none" or isinstance(model, FSDPModule):
        return contextlib.nullcontext()
    return torch.autocast(_device(), dtype=DTYPES[precision])


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

        return ShardedGradScaler(_device())
    return torch.amp.GradScaler(_device())
