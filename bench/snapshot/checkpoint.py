"""Checkpoint cost: how long training is blocked by one async save, one sync save and one
in-memory snapshot of the same state (model + AdamW), at two model sizes, as a share of the
step time at the default cadences; the sync save's throughput next to `dd` writing as many bytes
to the same disk; and a resharded load (4 -> 3 ranks) next to a same-size load (`bench.recovery.reshard`).
All measured side by side in one run.

The sync baseline is the best of three ways to save the same state synchronously, each measured
here: DCP with one writer thread (Phalanx's own writer, blocking), DCP with four writer threads,
and a plain `torch.save` of the state dicts to one file (fsynced, as DCP's writer syncs): a
skeptic's baseline is the fastest sync save this disk allows, not the one that flatters async.

Blocked time is what the training loop waits for: the whole `save()` when sync; only the staging
copy when async (the upload then runs in a background thread). The copy itself runs beside the
next forward and backward passes; the next optimizer step waits for it (`wait_staged`), so the
whole copy is counted: the most it can block. The async saves are committed
(waited for) between measurements, outside the blocked time. An in-memory snapshot
(`MemorySnapshots`, to /dev/shm as on a pod) blocks the same way: its staging copy.

Shares of step time use the job defaults: a checkpoint every 100 steps, a memory snapshot every
10 (`spec.checkpoint.intervalSteps`, `memoryIntervalSteps`), and the median of 5 training steps
(batch 8) of the same model on one rank.

Usage: python -m bench.snapshot.checkpoint [--repeats 3] [--sizes small,large] [--reshard small]
                                  [--out bench/results/checkpoint.md] [--json figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.filesystem import FileSystemWriter
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from bench.recovery import reshard
from phalanx.models.spec import Checkpoint
from phalanx.resume.checkpoint import CheckpointManager
from phalanx.resume.memory import MemorySnapshots
from phalanx.resume.state import AppState, TrainingProgress
from phalanx.trainer.model import ModelConfig, TinyLM

SIZES = {
    "small (dim 256, 4 layers)": ModelConfig(
        vocab=8192, seq_len=128, dim=256, heads=4, layers=4, hidden=1024
    ),
    "large (dim 1024, 8 layers)": ModelConfig(
        vocab=8192, seq_len=128, dim=1024, heads=8, layers=8, hidden=4096
    ),
}


CHECKPOINT_EVERY = int(Checkpoint.model_fields["interval_steps"].default)
SNAPSHOT_EVERY = int(Checkpoint.model_fields["memory_interval_steps"].default)


def blocked_seconds(
    manager: CheckpointManager, state: AppState, step: int, *, sync: bool
) -> tuple[float, float]:
    """Seconds blocked in all, and of them in the `save()` call itself (for an async save: DCP's
    planning and the launch; the rest is the staging copy)."""
    started = time.perf_counter()
    manager.save(step, {"app": state}, blocking=sync)
    called = time.perf_counter() - started
    manager.wait_staged()  # the most the next optimizer step can wait for the staging copy
    blocked = time.perf_counter() - started
    manager.wait()  # commit before the next measurement; not counted
    return blocked, called


def snapshot_blocked_seconds(snapshots: MemorySnapshots, state: AppState, step: int) -> float:
    started = time.perf_counter()
    snapshots.maybe_save(step, state)
    snapshots.wait_staged()
    blocked = time.perf_counter() - started
    snapshots.wait()  # written to memory before the next measurement; not counted
    return blocked


SYNC_THREADS = 4
"""The writer threads of the multi-threaded DCP baseline."""


def dcp_threads_seconds(directory: Path, state: AppState, threads: int) -> float:
    """One synchronous DCP save of `state` with `threads` writer threads (fsynced)."""
    target = directory / f"dcp-{threads}-{time.monotonic_ns()}"
    started = time.perf_counter()
    dcp_save({"app": state}, storage_writer=FileSystemWriter(target, thread_count=threads))
    elapsed = time.perf_counter() - started
    shutil.rmtree(target)
    return elapsed


def torch_save_seconds(directory: Path, model: TinyLM, optimizer: torch.optim.Optimizer) -> float:
    """`torch.save` of the model's and optimizer's state dicts to one file, fsynced."""
    target = directory / "plain.pt"
    started = time.perf_counter()
    with target.open("wb") as out:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, out)
        out.flush()
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - started
    target.unlink()
    return elapsed


def step_seconds(model: TinyLM, optimizer: torch.optim.Optimizer, config: ModelConfig) -> float:
    """The median of 5 training steps (batch 8, full sequence), after one to warm up."""
    batch = torch.randint(0, config.vocab, (8, config.seq_len))
    times = []
    for _ in range(6):
        started = time.perf_counter()
        optimizer.zero_grad()
        model(batch).float().mean().backward()
        optimizer.step()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def dd_seconds(directory: str, mib: int) -> float:
    """`dd` writing `mib` MiB to `directory` and syncing it, as DCP's writer syncs its files."""
    target = Path(directory) / "dd.bin"
    started = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}", "conv=fsync"],
                   check=True, capture_output=True)  # fmt: skip
    elapsed = time.perf_counter() - started
    target.unlink()
    return elapsed


def measure_size(name: str, config: ModelConfig, repeats: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model = TinyLM(config)
    optimizer = torch.optim.AdamW(model.parameters())
    step = step_seconds(model, optimizer, config)  # optimizer state exists, as in training
    params = sum(p.numel() for p in model.parameters())
    state = AppState(model, optimizer, TrainingProgress())
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp, \
         tempfile.TemporaryDirectory(dir="/dev/shm") as shm:  # fmt: skip
        manager = CheckpointManager(tmp, keep=1, async_save=True)
        blocked_seconds(manager, state, 0, sync=True)  # warm-up
        sync = [blocked_seconds(manager, state, 1 + i, sync=True)[0] for i in range(repeats)]
        others = Path(tmp) / "baselines"
        others.mkdir()
        threaded = [dcp_threads_seconds(others, state, SYNC_THREADS) for _ in range(repeats)]
        plain = [torch_save_seconds(others, model, optimizer) for _ in range(repeats)]
        async_parts = [blocked_seconds(manager, state, 100 + i, sync=False) for i in range(repeats)]
        asynchronous = [blocked for blocked, _ in async_parts]
        others.rmdir()
        size_mib = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()) / 2**20
        dd = statistics.median(dd_seconds(tmp, max(1, round(size_mib))) for _ in range(repeats))
        snapshots = MemorySnapshots(Path(shm), 1, 0)
        snapshot_blocked_seconds(snapshots, state, 0)  # warm-up: allocates the host buffers
        memory = [snapshot_blocked_seconds(snapshots, state, 1 + i) for i in range(repeats)]
        snapshots.close()
    variants = {
        "DCP, 1 writer thread": statistics.median(sync),
        f"DCP, {SYNC_THREADS} writer threads": statistics.median(threaded),
        "torch.save, one file": statistics.median(plain),
    }
    best = min(variants, key=variants.__getitem__)
    s, a, m = variants[best], statistics.median(asynchronous), statistics.median(memory)
    return {
        "model": name, "parameters": params, "size_mib": size_mib, "step_seconds": step,
        "sync_blocked": s, "sync_best": best, "sync_variants": variants,
        "async_blocked": a, "memory_blocked": m,
        "async_call": statistics.median(called for _, called in async_parts),
        "async_share_of_step_time": a / (CHECKPOINT_EVERY * step),
        "sync_share_of_step_time": s / (CHECKPOINT_EVERY * step),
        "memory_share_of_step_time": m / (SNAPSHOT_EVERY * step),
        "save_mib_per_s": size_mib / s, "dd_mib_per_s": round(size_mib) / dd,
    }  # fmt: skip


def _row(f: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        return f"{float(f[key]) * 1000:.0f} ms"

    def pct(key: str) -> str:
        return f"{float(f[key]) * 100:.2f} %"

    return (f"| {f['model']} | {float(f['parameters']) / 1e6:.1f} M | {float(f['size_mib']):.0f} MiB "
            f"| {ms('step_seconds')} | {ms('sync_blocked')} ({pct('sync_share_of_step_time')}) "
            f"| {ms('async_blocked')} ({pct('async_share_of_step_time')}) "
            f"| {ms('memory_blocked')} ({pct('memory_share_of_step_time')}) "
            f"| {float(f['async_blocked']) / float(f['sync_blocked']) * 100:.0f} % "
            f"| {float(f['save_mib_per_s']):.0f} / {float(f['dd_mib_per_s']):.0f} MiB/s |")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="small,large", help="small and/or large")
    parser.add_argument(
        "--reshard", default="small", help="the model size of the 4 -> 3 load ('' for none)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/checkpoint.md"))
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    chosen = args.sizes.split(",")
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    figures = [measure_size(name, config, args.repeats)
               for name, config in SIZES.items() if name.split()[0] in chosen]  # fmt: skip
    dist.destroy_process_group()
    resharded: dict[str, Any] | None = None
    if args.reshard:  # after the one-rank group is gone: its ranks are processes of their own
        name, config = next((n, c) for n, c in SIZES.items() if n.startswith(args.reshard))
        resharded = {"model": name, **reshard.measure(config, repeats=args.repeats)}
    machine = f"{socket.gethostname()}: {os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, CPU, local disk"
    report = (
        "# Checkpoint cost: sync, async and in-memory saves\n\n"
        f"Machine: {machine}. One rank; model + AdamW state; median of {args.repeats} saves each. "
        f"Blocked time per save, and in brackets its share of step time at the default cadence "
        f"(a checkpoint every {CHECKPOINT_EVERY} steps, a memory snapshot every {SNAPSHOT_EVERY}).\n\n"
        "| model | parameters | checkpoint | step | blocked, sync | blocked, async | blocked, in memory "
        "| async / sync | sync save / dd |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
        + "\n".join(map(_row, figures))
        + "\n"
    )
    if resharded is not None:
        report += (
            f"\nResharded load, {resharded['model']} ({resharded['size_mib']:.0f} MiB, FSDP2 over "
            f"{resharded['saved_by']} ranks): {resharded['resharded_to']} ranks "
            f"{resharded['resharded_load'] * 1000:.0f} ms, {resharded['saved_by']} ranks "
            f"{resharded['same_size_load'] * 1000:.0f} ms "
            f"({resharded['resharded_load'] / resharded['same_size_load']:.2f}x).\n"
        )
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    if args.json is not None:
        args.json.write_text(json.dumps(
            {"repeats": args.repeats, "models": figures, "reshard": resharded}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
