"""Run a node's agent (and so its workers) as real local processes, and read what they logged.

Every run gets a fresh rendezvous port and epoch, as the operator gives each epoch a fresh
rendezvous (stock torchrun restarts against stale peers fail here; see shared/machine.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.controlplane import free_port, wait_until


@dataclass
class LocalNode:
    """One agent process (a node pod's stand-in) with `nproc` workers."""

    process: subprocess.Popen[bytes]
    log: Path

    def workers(self) -> list[int]:
        """Pids of the agent's worker processes: its children, or for warm workers the children
        of its fork server (a multiprocessing helper, as is its resource tracker)."""
        import psutil

        pids = []
        try:
            children = psutil.Process(self.process.pid).children()
            for child in children:
                helper = "multiprocessing" in " ".join(child.cmdline())
                pids += [c.pid for c in child.children()] if helper else [child.pid]
        except psutil.NoSuchProcess:
            pass
        return sorted(pids)

    def kill_a_worker(self) -> None:
        """SIGKILL one worker, as a crashed rank would die."""
        os.kill(self.workers()[-1], signal.SIGKILL)

    def wait(self, timeout: float = 120) -> int:
        return self.process.wait(timeout=timeout)


def start_node(
    workdir: Path, nproc: int, *, epoch: int, trainer: dict[str, Any] | None = None,
    env: dict[str, str] | None = None, command: list[str] | None = None, nnodes: int = 1,
    node_rank: int = 0, master_port: int | None = None,
) -> LocalNode:  # fmt: skip
    """Start an agent for node `node_rank` of `nnodes` with the env contract a pod would get."""
    workdir.mkdir(parents=True, exist_ok=True)
    contract = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port or free_port()),
        "NNODES": str(nnodes),
        "NODE_RANK": str(node_rank),
        "NPROC_PER_NODE": str(nproc),
        "PHALANX_JOB": "local",
        "PHALANX_EPOCH": str(epoch),
        "PHALANX_CHECKPOINT_DIR": str(workdir / "checkpoints"),
        "PHALANX_HEARTBEAT_FILE": str(workdir / "heartbeat.json"),
        "PHALANX_TERMINATION_LOG": str(workdir / f"termination-{epoch}-{node_rank}.log"),
        "PHALANX_TRAINER_LOG_DIR": str(workdir / "log"),
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
    }
    settings = {_variable(k): str(v) for k, v in (trainer or {}).items()}
    full_env = {**os.environ, **contract, **settings, **(env or {})}
    log = workdir / f"agent-{epoch}-{node_rank}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "phalanx.agent", *(command or [])],
            env=full_env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return LocalNode(process, log)


def records(workdir: Path, name: str = "losses.jsonl") -> list[dict[str, Any]]:
    path = workdir / "log" / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def last_step(workdir: Path) -> int:
    return max((r["step"] for r in records(workdir) if "loss" in r), default=0)


def run_until_step(node: LocalNode, workdir: Path, step: int, timeout: float = 120) -> None:
    """Wait until the job logged `step` (the node must still be running)."""

    def reached() -> bool:
        if node.process.poll() is not None:
            raise AssertionError(
                f"agent exited {node.process.returncode}: {node.log.read_text()[-3000:]}"
            )
        return last_step(workdir) >= step

    wait_until(reached, timeout, f"step {step}", interval=0.02)


def kept_trajectory(workdir: Path) -> tuple[dict[int, float], dict[int, tuple[int, list[int]]]]:
    """Losses and global sample ids of the steps that count, from the run's logs (`trajectory`)."""
    samples = [json.loads(line) for path in sorted((workdir / "log").glob("samples-*.jsonl"))
               for line in path.read_text().splitlines()]  # fmt: skip
    return trajectory(records(workdir), samples)


def trajectory(
    loss_records: list[dict[str, Any]], sample_records: list[dict[str, Any]]
) -> tuple[dict[int, float], dict[int, tuple[int, list[int]]]]:
    """Losses and global sample ids of the steps that count.

    On each resume, the steps after the checkpoint it resumed from are dropped from the losses:
    they were redone. For samples, the run with the highest epoch that logged a step wins.
    Returns ({step: loss}, {step: (position, ids in global batch order)}).
    """
    losses: dict[int, float] = {}
    for record in loss_records:
        if record.get("event") == "resume":
            losses = {s: v for s, v in losses.items() if s <= record["step"]}
        elif "loss" in record:
            losses[record["step"]] = record["loss"]
    by_step: dict[int, dict[int, list[dict[str, Any]]]] = {}
    for record in sample_records:
        by_step.setdefault(record["step"], {}).setdefault(record["epoch"], []).append(record)
    samples = {}
    for step, runs in by_step.items():
        parts = sorted(runs[max(runs)], key=lambda r: r["dp_rank"])
        samples[step] = (parts[0]["position"], [i for part in parts for i in part["ids"]])
    return losses, samples


def check_exactly_once(
    samples: dict[int, tuple[int, list[int]]], dataset: int, global_batch: int, steps: int
) -> None:
    """Every kept step used the samples its global position names, and each data epoch used
    every sample exactly once (the last, partial epoch at most once)."""
    from phalanx.resume.sampler import GlobalSampler

    sampler = GlobalSampler(dataset, global_batch, seed=0)
    per_epoch: dict[int, Counter[int]] = {}
    for step in sorted(samples):
        position, ids = samples[step]
        assert ids == sampler.batch(position), (
            f"step {step} used other samples than its position says"
        )
        for offset, sample in enumerate(ids):
            per_epoch.setdefault(sampler.data_epoch(position + offset), Counter())[sample] += 1
    assert sorted(samples) == list(range(1, steps + 1))
    for epoch, counts in per_epoch.items():
        assert max(counts.values()) == 1, f"data epoch {epoch} repeated samples"
        complete = (epoch + 1) * dataset <= steps * global_batch
        assert not complete or len(counts) == dataset, f"data epoch {epoch} missed samples"


def _variable(setting: str) -> str:
    """The variable of a reference-trainer setting, or of the resume library's checkpoint
    settings (`checkpoint_*`, `collective_timeout_seconds`), which every program reads."""
    if setting.startswith("checkpoint_") or setting == "collective_timeout_seconds":
        return f"PHALANX_{setting.upper()}"
    return f"PHALANX_TRAINER_{setting.upper()}"


def check_same_trajectory(
    reference: Path, workdir: Path, steps: int, dataset: int, global_batch: int,
    tolerance: float = 1e-4,
) -> None:  # fmt: skip
    """The run in `workdir` kept every step 1..steps, its losses within `tolerance` of the
    uninterrupted run in `reference`, and both used every sample exactly once per data epoch."""
    expected, expected_samples = kept_trajectory(reference)
    losses, samples = kept_trajectory(workdir)
    assert sorted(losses) == list(range(1, steps + 1))
    worst = max(abs(expected[s] - losses[s]) for s in expected)
    assert worst <= tolerance, f"largest loss difference {worst:.2e}"
    check_exactly_once(expected_samples, dataset, global_batch, steps)
    check_exactly_once(samples, dataset, global_batch, steps)
