"""Warm workers: start each epoch's workers from a fork server that has torch imported already.

Why: importing torch costs seconds of CPU per process (docs/figures.md, "Warm workers"), paid by
every worker of every epoch, all at once, on the same cores. The agent itself never imports torch.
It keeps a multiprocessing fork server whose process imports torch and the command's module once, at
the pod's start (while it stands by or trains); a new epoch's worker is a fork of it that runs the
command with `runpy`, as `python` would. A command that is not a Python module or script (a shell
script, a binary) starts as a plain subprocess.

Forking after importing torch is safe while that process has not started CUDA or thread pools:
the server only imports, it never runs an operator.

Workers die with the agent, however it dies (see `lifeline`): a plain subprocess gets SIGKILL
when the agent dies; a warm worker gets it when the fork server dies. The server exits once no
process holds its "alive" pipe; every fork inherits one end of it, so a worker closes its copy
first thing, and then only the agent holds it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import runpy
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Protocol

from phalanx.agent import lifeline
from phalanx.models import env as contract

WARM_MODULES = (
    "torch",
    "torch.distributed",
    "torch.distributed.checkpoint",
    "torch._dynamo",  # DDP and FSDP import it on first use (docs/figures.md, "Warm workers")
)
"""What every warm worker finds imported, whatever its command."""
AGENT_MODULE = "phalanx.agent.main"


class WorkerProcess(Protocol):
    """The part of `subprocess.Popen` the supervisor uses."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass(frozen=True)
class PythonCommand:
    """`python -m module args...` or `python script.py args...`, the forms runpy can run."""

    module: str | None
    script: str | None
    args: tuple[str, ...]

    @property
    def argv0(self) -> str:
        return self.script or self.module or "python"


def python_command(argv: list[str]) -> PythonCommand | None:
    """The Python module or script `argv` runs, or None when a fork cannot run it the same way
    (not Python, or interpreter options such as -X or -c)."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    rest = [a for a in argv[1:] if a != "-u"]  # unbuffered: the fork flushes anyway
    if len(rest) >= 2 and rest[0] == "-m":
        return PythonCommand(rest[1], None, tuple(rest[2:]))
    if rest and not rest[0].startswith("-"):
        return PythonCommand(None, rest[0], tuple(rest[1:]))
    return None


def _release_fork_server() -> None:
    """Close this fork's copy of the fork server's "alive" pipe (multiprocessing passes one to
    every fork, for forks that fork in turn): the server exits when no copy is left, so while a
    worker held one, the server, and so the worker, would outlive the agent."""
    state = vars(multiprocessing.forkserver._forkserver)
    alive = state.get("_forkserver_alive_fd")
    if isinstance(alive, int):
        os.close(alive)
        state["_forkserver_alive_fd"] = None  # a fork server this worker wants is its own


def _run_in_fork(command: PythonCommand, env: dict[str, str]) -> None:
    """The body of a warm worker: dies with the fork server (so with the agent), its own session
    (so the agent can signal its whole group), the worker's environment, then the command as
    `python` would run it."""
    lifeline.die_with_parent()
    _release_fork_server()  # not before: until then, the server cannot exit
    lifeline.exit_if_gone(int(env[contract.PHALANX_AGENT_PID]))
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    threads = env.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    if threads and threads.isdigit() and torch is not None:
        torch.set_num_threads(int(threads))  # read at import, in the server's environment
    sys.stdout.flush()
    if command.module is not None:
        sys.argv = [command.module, *command.args]
        runpy.run_module(command.module, run_name="__main__", alter_sys=True)
    else:
        assert command.script is not None
        sys.argv = [command.script, *command.args]
        sys.path.insert(0, str(Path(command.script).resolve().parent))
        runpy.run_path(command.script, run_name="__main__")
    sys.stdout.flush()
    sys.stderr.flush()


def _ready() -> None:
    """The warm-up fork: nothing to do, its start is the proof."""


class ForkedWorker:
    """A warm worker, with Popen's interface (a negative return code is a signal)."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        pid = self._process.pid
        assert pid is not None
        return pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.argv0, timeout or 0.0)
        return self._process.exitcode

    @property
    def argv0(self) -> str:
        return self._process.name


@dataclass
class Launcher:
    """Starts one command's workers: warm forks when it is Python, subprocesses otherwise."""

    argv: list[str]
    warm: bool = True

    def __post_init__(self) -> None:
        self.command = python_command(self.argv) if self.warm else None
        self._context: ForkServerContext | None = None
        if self.command is not None:
            context = multiprocessing.get_context("forkserver")
            assert isinstance(context, ForkServerContext)
            modules = [*WARM_MODULES, __name__]
            if self.command.module is not None:
                modules.append(self.command.module)
            # multiprocessing re-runs the parent's main script in every child (as __mp_main__;
            # the `phalanx-agent` console script imports the agent): imported in the server
            # already, that costs nothing.
            modules.append(AGENT_MODULE)
            context.set_forkserver_preload(modules)
            self._context = context

    def warm_up(self) -> None:
        """Start the fork server and wait until it has imported everything: a spare that says
        it stands by is warm. (The server takes its first fork only after its imports.)"""
        if self._context is not None:
            probe = self._context.Process(target=_ready, name="phalanx-warm-up")
            probe.start()
            probe.join()

    def spawn(self, env: dict[str, str]) -> WorkerProcess:
        """Start one worker with `env` (and the agent's pid); it dies with the agent."""
        env = {**env, contract.PHALANX_AGENT_PID: str(os.getpid())}
        if self._context is None or self.command is None:
            return subprocess.Popen(
                self.argv,
                env=env,
                start_new_session=True,
                preexec_fn=lifeline.die_with_parent_hook(),
            )
        process = self._context.Process(
            target=_run_in_fork, args=(self.command, env), name=self.command.argv0, daemon=False
        )
        process.start()
        return ForkedWorker(process)


def signal_worker(worker: WorkerProcess, signum: int) -> None:
    """Signal the worker's process group (its own session), or the process while it has not
    made one yet. Even when the worker looks ended: a fork whose server died reads as ended
    (255) while it may still run."""
    try:
        os.killpg(worker.pid, signum)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signum)
