"""Pipeline parallelism (torch.distributed.pipelining), composed with data and tensor parallelism.

The ranks form a (dp, pp, tp) mesh, tp fastest (see `parallel.Layout`): one replica's pipeline is
`pp x tp` consecutive ranks, inside a pod when it fits, so a resize adds or removes whole
pipelines and changes the data-parallel degree only. Stage `i` keeps its share of TinyLM's blocks
(the first stages one more when they do not divide evenly), the embeddings on the first stage and
the norm and output head on the last; the other modules are deleted from its copy, as torchtitan
does, so its parameter names are the whole model's and a checkpoint (DCP, through
`state.AppState`) holds the whole model across ranks, resharded to any data-parallel degree. DDP
or FSDP2 then runs each stage over the `dp` sub-mesh, with tensor parallelism over `tp` inside.

Each replica takes its split of the global batch, as without pipelining, in equal micro-batches
(padded with weight-0 samples: the stages exchange activations of one shape), at least one per
stage, which the 1F1B schedule runs (GPipe's bubble, less activation memory). GPipe itself is
left out: with DDP stages, torch 2.15's reducer fails on its second step. The last stage computes
the loss: the same sample-weighted objective, and the same weighted sum of sample losses that the
trainer all-reduces for the log (zero on the other stages), so the reported loss means exactly
what it means without pipelining.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.distributed.pipelining.stage import PipelineStageInfo

from phalanx.models import env
from phalanx.resume import devices
from phalanx.resume.sampler import micro_batches, padded, split
from phalanx.trainer import parallel
from phalanx.trainer.config import TrainerConfig
from phalanx.trainer.model import TinyLM, sample_losses

IGNORED = -100
"""The target of a padding sample's tokens: cross-entropy's ignore index, so its loss is 0."""
Compute = Callable[[], contextlib.AbstractContextManager[None]]
"""Times this rank's own work for straggler detection (`HeartbeatWriter.compute`)."""


class SettingError(ValueError):
    """A combination of settings the reference trainer cannot run (an application error)."""


def check(config: TrainerConfig, pipeline_parallel: int) -> None:
    """Refuse, with the settings' names, what pipelining cannot do here."""
    if pipeline_parallel == 1:
        return
    setting = f"{env.PHALANX_PIPELINE_PARALLEL}={pipeline_parallel}"
    if pipeline_parallel > config.layers:
        raise SettingError(
            f"{setting} needs at least one layer per stage, but the model has {config.layers} "
            "(PHALANX_TRAINER_LAYERS)"
        )
    if config.sharding == "hsdp":
        raise SettingError(
            f"{setting} with PHALANX_TRAINER_SHARDING=hsdp is not supported: use fsdp or ddp "
            "for the data-parallel part of a pipeline"
        )
    if config.mixed_precision == "fp16":
        raise SettingError(
            f"{setting} with PHALANX_TRAINER_MIXED_PRECISION=fp16 is not supported (dynamic loss "
            "scaling would have to agree on overflows across stages): use bf16"
        )


def stage_layers(layers: int, stages: int, stage: int) -> list[int]:
    """The block indices of `stage`: contiguous, the first stages one more when uneven."""
    return split(list(range(layers)), stages, stage)


def cut(model: TinyLM, layout: parallel.Layout) -> TinyLM:
    """Keep only this rank's stage of `model` (in place): its blocks, the embeddings if first,
    the norm and output head if last."""
    keep = {str(i) for i in stage_layers(len(model.layers), layout.pp, layout.pp_rank)}
    for key in [key for key in model.layers if key not in keep]:
        del model.layers[key]
    if not layout.first_stage:
        model.tokens = model.positions = None
    if not layout.last_stage:
        model.norm = model.output = None
    return model


class _Stage(PipelineStage):
    """A stage whose backward passes count as this rank's compute, except the last one, which
    reduces the data-parallel gradients and so waits for the slowest replica."""

    def __init__(self, *args: Any, compute: Compute, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compute = compute

    def backward_one_chunk(
        self, bwd_chunk_id: int, loss: Any = None, full_backward: bool = True,
        last_backward: bool = False,
    ) -> None:  # fmt: skip
        with contextlib.nullcontext() if last_backward else self._compute():
            super().backward_one_chunk(bwd_chunk_id, loss, full_backward, last_backward)


class Pipeline:
    """This rank's stage of its replica's pipeline, wrapped for data parallelism, and the
    schedule that runs one optimizer step's micro-batches through it."""

    def __init__(
        self, model: TinyLM, config: TrainerConfig, layout: parallel.Layout, compute: Compute
    ) -> None:
        self.config, self.layout, self.compute = config, layout, compute
        self.device = devices.device()
        dims = {"dp": layout.dp, "pp": layout.pp, "tp": layout.tp}
        if layout.tp == 1:
            del dims["tp"]
        mesh = init_device_mesh(self.device.type, tuple(dims.values()), mesh_dim_names=tuple(dims))
        cut(model, layout)
        if config.activation_checkpointing:
            parallel.checkpoint_blocks(model)
        if layout.tp > 1:
            parallel.tensor_parallelize(model, mesh["tp"])
        self.module: nn.Module
        if config.sharding == "ddp" and layout.tp == 1:  # with TP, FSDP2 as without pipelining
            self.module = parallel.replicate(model, mesh["dp"].get_group())
        else:
            self.module = parallel.fully_shard_model(
                model, mesh["dp"], reshard=config.sharding != "fsdp-grad-op",
                precision=config.mixed_precision,
            )  # fmt: skip
        stage = _Stage(
            self.module, layout.pp_rank, layout.pp, self.device,
            group=mesh["pp"].get_group(), compute=compute,
        )  # fmt: skip
        stage.register_forward_context(self._forward_context)
        per_replica = math.ceil(config.global_batch_size / layout.dp)
        self.count = math.ceil(per_replica / config.micro_batch_size)
        self.count = max(self.count, layout.pp)  # 1F1B needs a micro-batch per stage
        self.size = math.ceil(per_replica / self.count)
        # The loss is already the global mean's share: no scaling by the micro-batch count.
        self.schedule = Schedule1F1B(stage, self.count, loss_fn=self._loss, scale_grads=False)
        self._sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self._probing = False

    @contextlib.contextmanager
    def _forward_context(self, info: PipelineStageInfo) -> Iterator[None]:
        """Around each forward pass of this stage (and the first step's shape inference, so it
        sees the dtypes autocast gives): this rank's compute, under mixed precision."""
        self._probing = info.is_metadata_inference
        with self.compute(), parallel.autocast(self.module, self.config.mixed_precision):
            yield

    def _loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """On the last stage, per micro-batch: the objective, as without pipelining, and the
        weighted sum of sample losses for the log. A padding sample's targets are all IGNORED
        (the schedule passes one tensor as the target): its weight and its loss are 0. The
        first step's shape inference calls this too, after its probe forward: not counted."""
        weights = (targets[:, 0] != IGNORED).float()
        with self.compute(), parallel.autocast(self.module, self.config.mixed_precision):
            losses = sample_losses(logits, targets)
            if not self._probing:
                self._sum += (losses.detach().double() * weights.double()).sum()
            share = self.layout.dp / self.config.global_batch_size
            return (losses * weights).sum() * share

    def step(self, ids: list[int], data: torch.Tensor) -> torch.Tensor:
        """Forward and backward of this replica's samples `ids` (rows of the host tensor `data`):
        the weighted sum of their sample losses on the last stage, zero on the others."""
        self._sum = torch.zeros((), dtype=torch.float64, device=self.device)
        inputs: list[tuple[torch.Tensor]] | None = [] if self.layout.first_stage else None
        targets: list[torch.Tensor] | None = [] if self.layout.last_stage else None
        for chunk in micro_batches(ids, self.count):  # the middle stages get activations only
            batch = data[padded(chunk, self.size)]
            if inputs is not None:
                inputs.append((devices.to_device(batch[:, :-1]),))
            if targets is not None:
                target = batch[:, 1:].clone()
                target[len(chunk) :] = IGNORED
                targets.append(devices.to_device(target))
        self.schedule.step(arg_mbs=inputs, target_mbs=targets, return_outputs=False)
        return self._sum
