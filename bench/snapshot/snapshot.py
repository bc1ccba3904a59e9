"""Memory snapshots at real model sizes, beside a DCP save and load of the same state: what a
snapshot blocks the training loop for, what it costs a run at the default cadence, and how long
a restore from memory takes. On the CPU here, and on a GPU where there is one (the same code:
the state lives on `devices.device()`).

Four figures per model (model + AdamW state, one rank), each the median of `--repeats`:

- blocked, called: the `maybe_save` call itself (the state dict, its structure, the hand-off);
- copied: from the call until the copy into the pod's memory is done (`wait_staged`): the most
  the next optimizer step can wait, were the next forward and backward passes instant;
- in a run: training steps with a snapshot at the default cadence against the same steps
  without, back to back: (with - without) / snapshots taken is what a snapshot really cost the
  loop, and (with - without) / without its share of step time. The default cadence is the one
  the job would keep (`SnapshotCadence`: every `memoryIntervalSteps`, or every multiple of it
  that keeps the measured call + copy within `memoryOverheadPercent` of step time);
- restore: `MemorySnapshots.load` into a fresh state, beside `dcp.load` of a DCP checkpoint of
  the same state saved to the same memory (tmpfs), and that DCP save's own time;
- a checkpoint at a snapshot's step: what the job's async checkpoint (`CheckpointManager.save`
  until its staging is done, when training may change the state) blocks for, staged by DCP's
  stager (the state copied into host buffers) and staged from the snapshot of its step (the
  snapshot's own cost is the figures above).

Usage: python -m bench.snapshot.snapshot [--sizes large,xl] [--repeats 3] [--steps 30] [--json F] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from phalanx.models.spec import Checkpoint
from phalanx.resume import devices
from phalanx.resume.cadence import SnapshotCadence
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.staging import LentSnapshot
from phalanx.resume.state import AppState, TrainingProgress
from phalanx.trainer.model import ModelConfig, TinyLM

SNAPSHOT_EVERY = int(Checkpoint.model_fields["memory_interval_steps"].default)
OVERHEAD_PERCENT = int(Checkpoint.model_fields["memory_overhead_percent"].default)


def default_spacing(copied: float, step: float) -> int:
    """Steps between snapshots at the default cadence for a snapshot that blocks `copied`
    seconds of `step`-second steps: what the job's `SnapshotCadence` settles on."""
    cadence = SnapshotCadence(SNAPSHOT_EVERY, OVERHEAD_PERCENT)
    cadence.step_took(step)
    cadence.snapshot_took(copied, counted=True)
    cadence.step_took(step)  # the copy is all it blocked: the step after it as the others
    return cadence.spacing


SIZES = {
    "toy": ModelConfig(),
    "large": ModelConfig(vocab=8192, seq_len=64, dim=1024, heads=8, layers=8, hidden=4096),
    "xl": ModelConfig(vocab=32768, seq_len=256, dim=2048, heads=16, layers=20, hidden=8192),
}
"""toy: the quickstart's model (75 072 parameters); large: bench.recovery.goodput's 117.5 M-parameter
model; xl: about 1.1 B parameters (for a GPU)."""

EMULATED_COMPUTE = {"toy": 0.1}
"""Seconds of emulated compute a step adds (`--step-delay-seconds`), as the quickstart's
trainer does: the toy's own compute is a few milliseconds, its job's steps are 0.1 s longer."""


def _sync() -> None:
    if devices.device().type == "cuda":
        torch.cuda.synchronize()


def _timed(action: Callable[[], object]) -> float:
    _sync()
    started = time.perf_counter()
    action()
    _sync()
    return time.perf_counter() - started


class Trainer:
    """A model and AdamW on the device, training on random tokens."""

    def __init__(self, config: ModelConfig, batch: int, delay: float = 0.0) -> None:
        self.delay = delay
        torch.manual_seed(0)
        self.model = TinyLM(config).to(devices.device())
        self.optimizer = torch.optim.AdamW(self.model.parameters())
        self.tokens = torch.randint(
            0, config.vocab, (batch, config.seq_len), device=devices.device()
        )
        self.state = AppState(self.model, self.optimizer, TrainingProgress())

    def step(self, memory: MemorySnapshots | None = None, number: int = 0) -> None:
        self.optimizer.zero_grad()
        self.model(self.tokens).float().mean().backward()
        if self.delay:
            time.sleep(self.delay)
        if memory is not None:
            memory.wait_staged()  # as the library's optimizer hook does
        self.optimizer.step()
        if memory is not None:
            memory.maybe_save(number, self.state)

    def train(self, steps: int, memory: MemorySnapshots | None = None) -> None:
        """`steps` steps, snapshotting into `memory` on its cadence (steps counted from 1)."""
        for number in range(1, steps + 1):
            self.step(memory, number)


def measure(name: str, config: ModelConfig, repeats: int, steps: int, batch: int) -> dict[str, Any]:
    trainer = Trainer(config, batch, EMULATED_COMPUTE.get(name, 0.0))
    for _ in range(3):  # warm up; AdamW's state exists from here on
        trainer.step()
    params = sum(p.numel() for p in trainer.model.parameters())
    step = statistics.median(_timed(trainer.step) for _ in range(5))
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        memory = MemorySnapshots(Path(shm, "pod"), 1, 0)
        Path(shm, "pod").mkdir()
        prepared = _timed(lambda: memory.prepare(trainer.state))  # as a job's first step does
        called, copied = [], []
        for number in range(repeats + 2):  # the first use of each slot: once prepared, a copy
            _sync()
            started = time.perf_counter()
            memory.maybe_save(number + 1, trainer.state)
            called.append(time.perf_counter() - started)
            memory.wait_staged()
            copied.append(time.perf_counter() - started)
            memory.wait()
        size = sum(p.stat().st_size for p in Path(shm, "pod").glob("*.bin")) / 2
        without, with_ = [], []
        spacing = default_spacing(statistics.median(copied[2:]), step)
        memory.interval_steps = spacing  # the same slots, now on the default cadence
        taken = max(1, steps // spacing)
        run = taken * spacing  # whole spacings, so every run holds its snapshots
        for _ in range(repeats):
            without.append(_timed(lambda: trainer.train(run)))
            with_.append(_timed(lambda: trainer.train(run, memory)))
            memory.wait()
        restore = [
            _timed(lambda: _restore(memory.directory, config, batch)) for _ in range(repeats)
        ]
        restore_build = statistics.median(_timed(lambda: Trainer(config, batch)) for _ in range(2))
        staged, from_snapshot = _checkpoint_blocked(trainer, memory, Path(shm, "ckpt"), repeats)
        memory.close()
        rounds = [_dcp_round(trainer, Path(shm, f"dcp-{i}"), config, batch) for i in range(repeats)]
    saves, loads = [save for save, _ in rounds], [load for _, load in rounds]
    extra = statistics.median(w - o for w, o in zip(with_, without, strict=True))
    return {
        "model": name, "parameters": params, "state_mib": size / 2**20, "step_seconds": step,
        "called": statistics.median(called[2:]), "copied": statistics.median(copied[2:]),
        "first_copied": copied[0], "prepared": prepared,
        "run_steps": run, "snapshots_in_run": taken, "default_spacing": spacing,
        "run_without": statistics.median(without), "run_with": statistics.median(with_),
        "blocked_in_run": extra / taken, "share_in_run": extra / statistics.median(without),
        "restore": statistics.median(restore) - restore_build,
        "dcp_save": statistics.median(saves), "dcp_load": statistics.median(loads),
        "checkpoint_staged": staged, "checkpoint_from_snapshot": from_snapshot,
    }  # fmt: skip


def _checkpoint_blocked(
    trainer: Trainer, memory: MemorySnapshots, root: Path, repeats: int
) -> tuple[float, float]:
    """What an async checkpoint blocks the loop for (the save call until its staging is done),
    staged by DCP's stager and staged from the snapshot of its step: medians of `repeats`, each
    after one of either kind (the stager's host buffers and the slots are in use by then)."""
    manager = CheckpointManager(str(root), keep=1)
    staged, from_snapshot = [], []
    for step in range(10**6, 10**6 + 2 * (repeats + 1), 2):  # past the run's steps
        staged.append(_timed(partial(_blocking, manager, step, trainer.state)))
        manager.wait()
        memory.maybe_save(step + 1, trainer.state, due=True)
        memory.wait_staged()  # the snapshot's own cost, measured apart
        lent = memory.lend(step + 1)
        assert lent is not None, "the snapshot holds the whole state"
        from_snapshot.append(_timed(partial(_blocking, manager, step + 1, trainer.state, lent)))
        manager.wait()
        memory.wait()
    manager.close()
    return statistics.median(staged[1:]), statistics.median(from_snapshot[1:])


def _blocking(manager: CheckpointManager, step: int, state: AppState,
              lent: LentSnapshot | None = None) -> None:  # fmt: skip
    manager.save(step, {"app": state}, snapshot=lent)
    manager.wait_staged()


def _dcp_round(
    trainer: Trainer, target: Path, config: ModelConfig, batch: int
) -> tuple[float, float]:
    """A DCP save of the state into memory (tmpfs) and a load of it into a fresh one: seconds."""
    saved = _timed(lambda: dcp_save({"app": trainer.state}, checkpoint_id=target))
    fresh = Trainer(config, batch)
    loaded = _timed(lambda: dcp_load({"app": fresh.state}, checkpoint_id=target))
    shutil.rmtree(target)
    return saved, loaded


def _restore(directory: Path | None, config: ModelConfig, batch: int) -> None:
    """A fresh model and optimizer (the caller takes their build time off), loaded from memory."""
    if MemorySnapshots(directory, 1, 0).load(Trainer(config, batch).state, None) is None:
        raise RuntimeError("the snapshot was not loaded")


def row(f: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        return f"{float(f[key]) * 1000:.0f} ms"

    return (f"| {f['model']} | {float(f['parameters']) / 1e6:.1f} M | {float(f['state_mib']):.0f} MiB "
            f"| {ms('step_seconds')} | {ms('called')} | {ms('copied')} "
            f"| {ms('blocked_in_run')} ({float(f['share_in_run']) * 100:.2f} %) "
            f"| {ms('restore')} | {ms('dcp_save')} | {ms('dcp_load')} "
            f"| {ms('checkpoint_staged')} | {ms('checkpoint_from_snapshot')} |")  # fmt: skip


def machine() -> str:
    where = (f"GPU {torch.cuda.get_device_name()}" if devices.device().type == "cuda"
             else f"CPU, {os.cpu_count()} cores")  # fmt: skip
    return f"{platform.node()}: {where}, torch {torch.__version__}"


def report(figures: list[dict[str, Any]], where: str, repeats: int) -> str:
    return (
        f"Memory snapshots at real sizes ({where}). One rank; model + AdamW state; median of "
        f"{repeats}. In a run: {figures[0]['run_steps']} steps with a snapshot at the default "
        "cadence (every " + ", ".join(f"{f['default_spacing']} ({f['model']})" for f in figures)
        + ") against the same steps without; blocked per snapshot "
        "and, in brackets, its share of step time. Restore: a fresh state loaded from the pod's "
        "memory; DCP: a save and a load of the same state in the same memory (tmpfs). "
        "Checkpoint: what the job's async checkpoint blocks (until staged), staged by DCP and "
        "staged from the snapshot of its step.\n\n"
        "| model | parameters | snapshot | step | call | call + copy | in a run | restore "
        "| DCP save | DCP load | checkpoint, DCP staged | checkpoint, from the snapshot |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
        + "\n".join(map(row, figures)) + "\n\nA job maps its two slots with every page made "
        "(on a GPU, pinned) once, within its first optimizer step (`MemorySnapshots.prepare`): "
        + ", ".join(f"{float(f['prepared']) * 1000:.0f} ms ({f['model']})" for f in figures)
        + "; the first snapshot after that took "
        + ", ".join(f"{float(f['first_copied']) * 1000:.0f} ms ({f['model']})" for f in figures)
        + ".\n"
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="large")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--steps", type=int, default=30, help="steps of each run (a multiple of 10)"
    )
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    figures = [measure(name, SIZES[name], args.repeats, args.steps, args.batch)
               for name in args.sizes.split(",")]  # fmt: skip
    text = report(figures, machine(), args.repeats)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": machine(), "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
