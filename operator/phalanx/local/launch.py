"""What a local node pod runs: the container's command with the operator's env contract, rewritten
for loopback and a local work directory.

Why through the operator's builder: `pod_env` is the contract a pod gets on a cluster; the local
backend changes only what must differ on one machine (rank 0's address, a fresh port per epoch,
file paths), so a script that runs locally runs the same in a pod.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from phalanx.local.cluster import Launch
from phalanx.local.processes import RUN_MARKER_ENV
from phalanx.models import env
from phalanx.models.job import TrainingJob
from phalanx.operator.builder import BuildSettings
from phalanx.operator.builder.env import pod_env

LOOPBACK = "127.0.0.1"
AGENT_NAMES = ("phalanx-agent",)


@dataclass(frozen=True)
class Workdir:
    """Where a local run keeps its files."""

    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def heartbeat(self) -> Path:
        return self.root / "heartbeat.json"

    @property
    def logs(self) -> Path:
        """The reference trainer's losses.jsonl and samples-*.jsonl."""
        return self.root / "log"

    def newest_checkpoint(self) -> tuple[int, Path] | None:
        """The newest committed checkpoint in the run's directory: `step-<N>/` with its
        `.metadata` (the trainer writes it last, atomically)."""
        steps = [
            (int(path.name.removeprefix("step-")), path)
            for path in self.checkpoints.glob("step-*")
            if path.name.removeprefix("step-").isdigit() and (path / ".metadata").exists()
        ]
        return max(steps, default=None)

    def pod_log(self, pod: str) -> Path:
        return self.root / "pods" / f"{pod}.log"

    def termination_log(self, pod: str) -> Path:
        return self.root / "pods" / f"{pod}.termination-log"

    @property
    def assignment(self) -> Path:
        """The current epoch's assignment, which every agent of the run follows."""
        return self.root / "assignment.json"

    def agent_report(self, pod: str) -> Path:
        return self.root / "pods" / f"{pod}.agent.json"


def free_port() -> int:
    """A free TCP port on loopback for an epoch's rendezvous."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def command(job: TrainingJob, variables: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The first container's command line, with the image's entrypoint (`phalanx-agent`) when it
    sets only `args`, as Kubernetes does; the agent runs with this interpreter. `$(NAME)` is
    replaced with the value of NAME in `variables` (the container's env), as the kubelet does."""
    container = job.spec.template.spec.containers[0]
    argv = [*(container.command or ["phalanx-agent"]), *(container.args or [])]
    if argv[0] in AGENT_NAMES:
        argv = [sys.executable, "-m", "phalanx.agent", *argv[1:]]
    return tuple(expand(arg, variables or {}) for arg in argv)


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Kubernetes' expansion of command and args: `$(NAME)` becomes NAME's value when the
    container's env defines it, and stays as written when not; `$$` is a literal `$`."""

    def replace(match: re.Match[str]) -> str:
        name = match[1]
        if name is None:
            return "$"
        return variables.get(name, match[0])

    return _REFERENCE.sub(replace, text)


def runs_agent(job: TrainingJob) -> bool:
    """Whether the job's pods run `phalanx-agent` (the image's entrypoint, or named): only
    those take new epochs in place and stand by as hot spares."""
    return command(job)[1:3] == ("-m", "phalanx.agent")


def checkpoint_env(job: TrainingJob, workdir: Workdir) -> dict[str, str]:
    """A remote checkpoint URL is kept; a cluster path becomes the run's own directory."""
    url = job.spec.checkpoint.url
    if url is not None and not url.startswith("file://"):
        return {env.PHALANX_CHECKPOINT_URL: url}
    return {env.PHALANX_CHECKPOINT_DIR: str(workdir.checkpoints)}


def container_env(job: TrainingJob) -> dict[str, str]:
    """The first container's literal env values (valueFrom needs a cluster; see `warnings`)."""
    container = job.spec.template.spec.containers[0]
    return {e.name: e.value for e in container.env or () if e.value is not None}


MEMORY_PREFIX = "phalanx-"


def _memory_base() -> Path:
    shared = Path("/dev/shm")
    return shared if shared.is_dir() else Path(tempfile.gettempdir())


def memory_root(run_id: str, pid: int | None = None) -> Path:
    """Where a run's pods keep their memory snapshots: host memory (/dev/shm) where there is
    one. Per run, so that the runner can remove what a killed agent left behind, and named with
    the runner's pid (default: this process), so that a later run can remove what a killed
    runner left behind (see `sweep_memory_roots`)."""
    return _memory_base() / f"{MEMORY_PREFIX}{os.getpid() if pid is None else pid}-{run_id}"


def sweep_memory_roots() -> list[Path]:
    """Remove the memory roots of this user's runs whose runner is gone (SIGKILLed: it could not
    clean up); returns them. Those of runs still going are kept."""
    swept = []
    for path in _memory_base().glob(f"{MEMORY_PREFIX}*-*"):
        pid = path.name.removeprefix(MEMORY_PREFIX).partition("-")[0]
        try:
            mine = path.is_dir() and path.lstat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    return swept


def _running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie is gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def node_launch(
    job: TrainingJob,
    name: str,
    epoch: int,
    rank: int,
    nodes: int,
    master_port: int,
    workdir: Workdir,
    run_id: str,
    heartbeat_seconds: float,
) -> Launch:
    """The agent of pod `name`, as a local process: node pod `rank` of `epoch` (or a standby
    pod, with a placeholder rank, that waits for an assignment)."""
    contract = pod_env(job, epoch, rank, nodes, BuildSettings(master_port=master_port))
    for key in env.spellings(env.MASTER_ADDR):
        contract[key] = LOOPBACK
    contract.pop(env.PHALANX_CHECKPOINT_DIR, None)
    contract.pop(env.PHALANX_CHECKPOINT_URL, None)
    contract.pop(env.PHALANX_HEARTBEAT_LEASE, None)
    contract.pop(env.PHALANX_ASSIGNMENT_LEASE, None)  # the run's assignment file instead
    interpreter_dir = str(Path(sys.executable).parent)
    pod = {
        **container_env(job),
        **contract,
        **checkpoint_env(job, workdir),
        "PHALANX_TRAINER_LOG_DIR": str(workdir.logs),
        env.PHALANX_HEARTBEAT_FILE: str(workdir.heartbeat),
        env.PHALANX_HEARTBEAT_SECONDS: str(heartbeat_seconds),
        env.PHALANX_TERMINATION_LOG: str(workdir.termination_log(name)),
        env.PHALANX_POD_NAME: name,
        env.PHALANX_ASSIGNMENT_FILE: str(workdir.assignment),
        env.PHALANX_AGENT_REPORT_FILE: str(workdir.agent_report(name)),
        env.PHALANX_CHECKPOINT_MEMORY_DIR: str(memory_root(run_id) / name),
        RUN_MARKER_ENV: run_id,
    }
    values = {
        **os.environ,
        "PATH": os.pathsep.join([interpreter_dir, os.environ.get("PATH", "")]),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        **pod,
    }
    return Launch(
        command(job, pod),
        values,
        workdir.pod_log(name),
        workdir.termination_log(name),
        workdir.agent_report(name),
    )


def warnings(job: TrainingJob) -> list[str]:
    """What a local run ignores from the manifest, said once at the start."""
    spec = job.spec.template.spec
    notes = [f"image {spec.containers[0].image!r} is not pulled: the command runs on this machine"]
    if len(spec.containers) > 1:
        names = ", ".join(c.name for c in spec.containers[1:])
        notes.append(f"only the first container runs locally; not run: {names}")
    if any(e.value_from is not None for e in spec.containers[0].env or ()):
        notes.append("env entries with valueFrom need a cluster and are not set")
    if job.spec.checkpoint.url is None or job.spec.checkpoint.url.startswith("file://"):
        notes.append("checkpoints go to the run's directory, not spec.checkpoint's path")
    return notes
