"""Where the trainer's tensors live: one decision, `device()`, that everything else follows.

Why one function: a GPU job and the CPU test suite must run the same code. With GPUs the worker
computes on `cuda:LOCAL_RANK` and its default process group is NCCL; without, on the CPU with
gloo. A tensor that a collective sends must sit on the device of the group's backend: NCCL takes
device tensors only, gloo (the side groups for checkpoints and the monitored barrier) host
tensors only. Host-side state (the data set, the sampler's generator, the RNG state) says
`device="cpu"` explicitly, which is right on both kinds of machine.
"""

from __future__ import annotations

import os
import re

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from phalanx.models import env

HOST = torch.device("cpu")


def device() -> torch.device:
    """`cuda:LOCAL_RANK` when this machine has GPUs, else the CPU."""
    if not torch.cuda.is_available():
        return HOST
    local_rank = int(os.environ.get(env.LOCAL_RANK, "0"))
    if local_rank >= torch.cuda.device_count():
        raise RuntimeError(
            f"{env.LOCAL_RANK}={local_rank} but this pod sees {torch.cuda.device_count()} GPUs: "
            "nprocPerNode must not exceed the GPUs of a pod"
        )
    return torch.device("cuda", local_rank)


def backend() -> str:
    """The default process group's backend: NCCL for GPUs, gloo for the CPU."""
    return "nccl" if device().type == "cuda" else "gloo"


def for_group(group: dist.ProcessGroup | None = None) -> torch.device:
    """The device of a tensor sent through `group` (None: the default group): the compute device
    for an NCCL group, the host for a gloo one."""
    return device() if "nccl" in str(dist.get_backend(group)) else HOST


def to_device(batch: torch.Tensor) -> torch.Tensor:
    """A host batch on the compute device. On a GPU it goes through pinned memory, so the copy
    is asynchronous and the CPU queues the forward pass behind it instead of waiting."""
    target = device()
    if target.type != "cuda":
        return batch.to(target)
    return batch.pin_memory().to(target, non_blocking=True)


def stager() -> DefaultStager:
    """How checkpoints and memory snapshots copy the state to host memory (see `settle`).

    The copy runs in a background thread, and training goes on with the next step's forward and
    backward passes; it must only be finished before the next optimizer step writes to the
    parameters and the optimizer state (the callers' `wait_staged`). On a GPU the copy goes into
    pinned host buffers, reused from one save to the next, as non-blocking copies on a CUDA stream
    of its own: the training stream never queues behind the device-to-host transfer. On the CPU
    it is a plain copy in that thread.
    """
    gpu = device().type == "cuda"
    return DefaultStager(
        StagingOptions(
            use_pinned_memory=gpu,
            use_shared_memory=False,
            use_async_staging=True,
            use_non_blocking_copy=gpu,
        )
    )


def stager_reusable(version: str = torch.__version__) -> bool:
    """Whether one `stager()` may stage checkpoint after checkpoint (its host buffers reused).
    torch 2.11's `DefaultStager` closes its state-dict stager at the end of every stage, and the
    next stage fails with `KeyError: <class 'type'>` (pytorch/pytorch#183413; seen here on an
    H200 with torch 2.11.0+cu130, on the CPU as on the GPU): with it, each save gets its own."""
    major_minor = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    return major_minor != (2, 11)


def settle() -> None:
    """Wait for the work queued on the compute device so far, before a copy on another stream
    reads its results. Between steps this costs nothing: the step's loss (`.item()`) has already
    waited for the step's last kernels; this states the requirement instead of relying on it."""
    if device().type == "cuda":
        torch.cuda.current_stream(device()).synchronize()
