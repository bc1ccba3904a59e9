"""The baseline: the reference trainer under stock `torchrun --max-restarts`, on one agent, with
the job's own trainer settings and checkpoint cadence, given its best chance
(`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`, c10d rendezvous, a 0.1 s monitor interval). Shared by
`bench.recovery.recovery` and `bench.recovery.intervals`, so both measure the same baseline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from phalanx.models import TrainingJob
from phalanx.operator.builder.env import checkpoint_env, trainer_env

RANKS = 4
"""The quickstart's workers (4 nodes x 1 process)."""


def ranks(spec: TrainingJob) -> int:
    """The job's workers at full size: torchrun runs them all on its one agent."""
    return spec.spec.replicas.max * spec.spec.nproc_per_node


def trainer_args(spec: TrainingJob) -> list[str]:
    """The reference trainer's arguments in the job's template (`python -m
    phalanx.trainer.train ARGS`): both sides run the same model and emulated compute."""
    args = list(spec.spec.template.spec.containers[0].args or [])
    module = args.index("phalanx.trainer.train")
    return args[module + 1 :]


def start(spec: TrainingJob, workdir: Path, max_restarts: int) -> subprocess.Popen[bytes]:
    """torchrun with the job's workers of the reference trainer, logging under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ, **trainer_env(spec), **checkpoint_env(spec),  # the job's own cadence
        "PHALANX_CHECKPOINT_DIR": str(workdir / "checkpoints"),
        "PHALANX_TRAINER_LOG_DIR": str(workdir / "log"),
        "PET_NNODES": "1", "PET_NODE_RANK": "0", "PET_NPROC_PER_NODE": str(ranks(spec)),
        "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }  # fmt: skip
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--max-restarts={max_restarts}", "--monitor-interval=0.1",
            "-m", "phalanx.trainer.train", *trainer_args(spec)]  # fmt: skip
    with (workdir / "torchrun.log").open("wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(agent: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a scheduler would; SIGKILL after 30 s."""
    agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()


def worker(agent: int, rank: int) -> psutil.Process | None:
    """The worker process of global rank `rank` under the torchrun agent `agent`, if running."""
    try:
        for process in psutil.Process(agent).children(recursive=True):
            if process.environ().get("RANK") == str(rank):
                return process
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return None
