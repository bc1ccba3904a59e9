"""Checkpoint stall: how long training is blocked by one async save vs one sync save of the same
state (model + AdamW), at two model sizes, measured side by side in one run.

Blocked time is what the training loop waits for: the whole `save()` when sync; only the staging
copy when async (the upload then runs in a background thread). The copy itself runs beside the
next forward and backward passes; the next optimizer step waits for it (`wait_staged`), so the
whole copy is counted: the most it can block. The async saves are committed
(waited for) between measurements, outside the blocked time.

Usage: python -m bench.checkpoint [--repeats 3] [--sizes small,large] [--out bench/results/checkpoint.md]
                                  [--json figures.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from phalanx.trainer.checkpoint import CheckpointManager
from phalanx.trainer.model import ModelConfig, TinyLM
from phalanx.trainer.progress import TrainingProgress
from phalanx.trainer.state import AppState

SIZES = {
    "small (dim 256, 4 layers)": ModelConfig(
        vocab=8192, seq_len=128, dim=256, heads=4, layers=4, hidden=1024
    ),
    "large (dim 1024, 8 layers)": ModelConfig(
        vocab=8192, seq_len=128, dim=1024, heads=8, layers=8, hidden=4096
    ),
}


def blocked_seconds(manager: CheckpointManager, state: AppState, step: int, *, sync: bool) -> float:
    started = time.perf_counter()
    manager.save(step, {"app": state}, blocking=sync)
    manager.wait_staged()  # the most the next optimizer step can wait for the staging copy
    blocked = time.perf_counter() - started
    manager.wait()  # commit before the next measurement; not counted
    return blocked


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="small,large", help="small and/or large")
    parser.add_argument("--out", type=Path, default=Path("bench/results/checkpoint.md"))
    parser.add_argument("--json", type=Path, help="also write the figures here, as JSON")
    args = parser.parse_args()
    chosen = args.sizes.split(",")
    figures = []
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # type: ignore[attr-defined]
    rows = []
    for name, config in SIZES.items():
        if name.split()[0] not in chosen:
            continue
        torch.manual_seed(0)
        model = TinyLM(config)
        optimizer = torch.optim.AdamW(model.parameters())
        model(torch.zeros(1, 8, dtype=torch.long)).sum().backward()
        optimizer.step()  # optimizer state exists, as in training
        params = sum(p.numel() for p in model.parameters())
        state = AppState(model, optimizer, TrainingProgress())
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            manager = CheckpointManager(tmp, keep=1, async_save=True)
            blocked_seconds(manager, state, 0, sync=True)  # warm-up
            sync = [blocked_seconds(manager, state, 1 + i, sync=True) for i in range(args.repeats)]
            asynchronous = [
                blocked_seconds(manager, state, 100 + i, sync=False) for i in range(args.repeats)
            ]
            size_mib = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()) / 2**20
        s, a = statistics.median(sync), statistics.median(asynchronous)
        figures.append({"model": name, "parameters": params, "size_mib": size_mib,
                        "sync_blocked": s, "async_blocked": a})  # fmt: skip
        rows.append(
            f"| {name} | {params / 1e6:.1f} M | {size_mib:.0f} MiB | {s * 1000:.0f} ms | {a * 1000:.0f} ms | {s / a:.1f}x |"
        )
    dist.destroy_process_group()
    machine = f"{socket.gethostname()}: {os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, CPU, local disk"
    report = (
        "# Checkpoint stall: async vs sync save\n\n"
        f"Machine: {machine}. One rank; model + AdamW state; median of {args.repeats} saves each.\n\n"
        "| model | parameters | checkpoint | blocked, sync | blocked, async | sync / async |\n"
        "| --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    if args.json is not None:
        args.json.write_text(json.dumps({"repeats": args.repeats, "models": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
