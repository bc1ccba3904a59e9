"""The reference trainer: `python -m phalanx.trainer.train` under the agent (or torchrun).

parse config -> build -> train -> close, destroying the process group only on success. The loop
keeps the global batch constant at any world size (micro-batches and gradient accumulation), and
weights each rank's loss so the gradient is the exact global mean even when the batch does not
split evenly. With pipeline parallelism a schedule runs the micro-batches (pipeline.py).

Devices: the model, each batch and every tensor that goes through the default group are on
`devices.device()` (cuda:LOCAL_RANK with NCCL, or the CPU with gloo); the data set stays on the
host and each batch moves as it is used.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from phalanx import phases
from phalanx.models import env
from phalanx.models.heartbeat import Resume, StartupTimes
from phalanx.pod import PodEnv
from phalanx.resume import Resumable, devices
from phalanx.resume.sampler import micro_batches
from phalanx.trainer import distributed, emulated, parallel
from phalanx.trainer.config import TrainerConfig
from phalanx.trainer.data import SyntheticTokens
from phalanx.trainer.model import ModelConfig, TinyLM, sample_losses
from phalanx.trainer.pipeline import Pipeline
from phalanx.trainer.pipeline import check as check_pipeline
from phalanx.trainer.progress import HeartbeatWriter


class Trainer:
    def __init__(self, config: TrainerConfig, pod: PodEnv) -> None:
        self.config, self.pod = config, pod
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        check_pipeline(config, pod.pipeline_parallel)
        self.layout = parallel.layout(pod.tensor_parallel, pod.pipeline_parallel)
        self.heartbeat = HeartbeatWriter(epoch=pod.epoch)
        torch.manual_seed(config.seed)
        shape = ModelConfig(
            config.vocab, config.seq_len, config.dim, config.heads, config.layers, config.hidden
        )
        with torch.device(devices.device()):
            model = TinyLM(shape)
        self.pipeline: Pipeline | None = None
        if self.layout.pp > 1:
            self.pipeline = Pipeline(model, config, self.layout, self.heartbeat.compute)
            self.model = self.pipeline.module
        else:
            self.model = parallel.parallelize(
                model, config.sharding, config.mixed_precision,
                config.activation_checkpointing, pod.tensor_parallel, pod.nproc_per_node,
            )  # fmt: skip
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.learning_rate)
        self.scaler = parallel.grad_scaler(self.model, config.mixed_precision)
        self.data = SyntheticTokens(
            config.dataset_samples, config.seq_len, config.vocab, config.seed
        ).build()
        # The resume library: sampler, checkpoints and snapshots on the spec's cadence, the
        # same code a user's script gets (phalanx.resume).
        self.run = Resumable(
            self.model, self.optimizer,
            dataset_size=config.dataset_samples, global_batch=config.global_batch_size,
            seed=config.seed, data_parallel=(self.layout.dp, self.layout.dp_rank),
            part=self.layout.part, reporter=self.heartbeat.reporter,
        )  # fmt: skip

    def can_resume(self) -> bool:
        """Whether there is state to resume from (the start-up phase `loading` then loads)."""
        return self.run.can_resume()

    def resume(self) -> None:
        """From the ranks' memory snapshots or storage's newest valid checkpoint, resharded."""
        step = self.run.resume()
        self.heartbeat.resumed = Resume.model_validate({"step": step, "source": self.run.source})
        self._log({"event": "resume", "step": self.run.step, "world": self.world,
                   "from": step, "source": self.run.source,
                   "time": round(time.time(), 3)})  # fmt: skip

    def train(self, startup: Startup | None = None) -> None:
        config = self.config
        first = True
        while self.run.step < config.steps:
            loss = self.train_step()
            self.run.step_done(report=False)  # counts, saves, snapshots; the heartbeat below
            if first:  # the first step of this run, resumed or not: peers are all here now
                first = False
                phases.enter("training")
                if startup is not None:
                    self.heartbeat.startup = startup.first_step()
                    self._log({"event": "startup", "epoch": self.pod.epoch,
                               **self.heartbeat.startup.model_dump()})  # fmt: skip
            self.heartbeat.step_done(
                self.run.step, loss, config.global_batch_size, self.run.data_epoch, config.steps
            )
            with self.heartbeat.compute():  # stands for a bigger model's compute on this rank
                emulated.work(config.step_delay_seconds)
        with self.heartbeat.reporter.saving(self.run.step):
            time.sleep(config.final_save_delay_seconds)  # emulated slow storage (0: none)
            self.run.finish()

    def train_step(self) -> float:
        """One optimizer step of the job's next global batch; its mean loss (the library
        counts the step afterwards, in `run.step_done`)."""
        config, layout = self.config, self.layout
        position, step = self.run.position, self.run.step + 1
        ids = self.run.batch()
        if self.pipeline is not None:
            local_sum = self.pipeline.step(ids, self.data)
        else:
            local_sum = self._accumulate(ids)
        self._update()
        if layout.tp_rank != 0:
            local_sum.zero_()  # a tensor-parallel group saw the same samples: count them once
        dist.all_reduce(local_sum)
        loss = float(local_sum.item()) / config.global_batch_size
        if layout.tp_rank == 0 and layout.first_stage:  # once per data-parallel replica
            record = {"step": step, "position": position, "ids": ids,
                      "dp_rank": layout.dp_rank, "epoch": self.pod.epoch}  # fmt: skip
            self._log(record, f"samples-{layout.dp_rank}.jsonl")
        self._log({"step": step, "loss": loss, "world": self.world,
                   "epoch": self.pod.epoch, "time": round(time.time(), 3)})  # fmt: skip
        return loss

    def _accumulate(self, ids: list[int]) -> torch.Tensor:
        """Forward and backward of this rank's samples `ids` in micro-batches (gradient
        accumulation): the weighted sum of their sample losses."""
        config, layout, device = self.config, self.layout, devices.device()
        per_rank = math.ceil(config.global_batch_size / layout.dp)
        count = math.ceil(per_rank / config.micro_batch_size)  # the same on every rank
        local_sum = torch.zeros((), dtype=torch.float64, device=device)
        for index, chunk in enumerate(micro_batches(ids, count)):
            weights = (
                torch.ones(len(chunk), device=device) if chunk else torch.zeros(1, device=device)
            )
            batch = devices.to_device(self.data[chunk] if chunk else self.data[:1])
            syncs = index == count - 1
            with (
                self.heartbeat.compute(),  # this rank's own work: a straggler shows here
                parallel.gradient_sync(self.model, syncs),
                parallel.autocast(self.model, config.mixed_precision),
            ):
                losses = sample_losses(self.model(batch[:, :-1]), batch[:, 1:])
                objective = (losses * weights).sum() * layout.dp / config.global_batch_size
            scaled = self.scaler.scale(objective) if self.scaler else objective
            # The backward that reduces gradients waits for the slowest peer: not compute.
            with contextlib.nullcontext() if syncs else self.heartbeat.compute():
                scaled.backward()
            local_sum += (losses.detach().double() * weights.double()).sum()
        return local_sum

    def _update(self) -> None:
        """The optimizer step (it first waits for a save's or snapshot's copy of the state: the
        library hooks the optimizer)."""
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def close(self) -> None:
        self.run.close()

    def _log(self, record: dict[str, Any], name: str = "losses.jsonl") -> None:
        if self.config.log_dir is None or (name == "losses.jsonl" and self.rank != 0):
            return
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        with Path(self.config.log_dir, name).open("a") as out:
            out.write(json.dumps(record) + "\n")


class Startup:
    """Stamps the stages of this worker's start (see phalanx.models.heartbeat.StartupTimes)."""

    def __init__(self) -> None:
        spawned = os.environ.get(env.PHALANX_SPAWNED_AT)
        self.times: dict[str, float | None] = {"spawned": float(spawned) if spawned else None}
        self.mark("started")

    def mark(self, stage: str) -> None:
        self.times[stage] = round(time.time(), 3)

    def first_step(self) -> StartupTimes:
        self.mark("first_step")
        return StartupTimes.model_validate(self.times)


def main() -> None:
    startup = Startup()
    config = TrainerConfig(_cli_parse_args=sys.argv[1:] or False)
    pod = PodEnv.read()
    with distributed.failures_as_exit_codes():
        timeouts = distributed.Timeouts()
        phases.enter("rendezvous")
        distributed.init(timeouts)
        distributed.preflight(timeouts)
        startup.mark("rendezvous")
        trainer = Trainer(config, pod)
        startup.mark("built")
        phases.enter("loading", resuming=trainer.can_resume())
        trainer.resume()
        startup.mark("loaded")
        phases.enter("first-step")
        trainer.train(startup)
        trainer.close()
        dist.destroy_process_group()
    # Everything is saved and the process group is gone. Skip the interpreter's teardown of
    # torch's C++ state, which has aborted ("terminate called without an active exception")
    # after a clean run on loaded machines and would turn a success into a failed pod.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
