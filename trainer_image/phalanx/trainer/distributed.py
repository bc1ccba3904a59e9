"""Process-group set-up for workers: env:// rendezvous, a preflight collective, timeouts that are
long while starting and short once training runs, and exit codes the operator can classify.

Why the preflight: a rank that cannot join a tiny all-reduce and barrier within seconds is a
broken node or network, not a training bug. It is reported by rank and host (exit 76 and a
message the agent puts in the pod's termination message), so the operator restarts elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import cast

import torch
import torch.distributed as dist

from phalanx.models import env, exits
from phalanx.resume import devices

ERROR_FILE_ENV = env.PHALANX_WORKER_ERROR_FILE


class PreflightError(RuntimeError):
    """This rank could not complete the preflight collective."""


@dataclass(frozen=True)
class Timeouts:
    startup: timedelta = timedelta(minutes=10)
    """Rendezvous and first step: images pull, data loads, peers arrive late."""
    preflight: timedelta = timedelta(seconds=60)
    """The preflight barrier: everyone is up by now, so a missing rank is broken."""


_side_group: dist.ProcessGroup | None = None
"""A gloo group beside an NCCL default group, for the monitored barrier (gloo only)."""


def init(timeouts: Timeouts) -> None:
    """Join the job's process group (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the env)."""
    global _side_group
    device = devices.device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(devices.backend(), timeout=timeouts.startup)
    if devices.backend() != "gloo":  # created now, while every rank is here, not at preflight
        _side_group = cast(
            dist.ProcessGroup, dist.new_group(backend="gloo", timeout=timeouts.preflight)
        )


def preflight(timeouts: Timeouts) -> None:
    """A monitored barrier (gloo names the ranks that do not arrive) and a tiny all-reduce, with a
    short timeout: everyone is up by now, so a missing rank is a broken node or network."""
    try:
        dist.monitored_barrier(group=_side_group, timeout=timeouts.preflight, wait_all_ranks=True)
        probe = torch.ones(1, device=devices.for_group())
        dist.all_reduce(probe)
        if int(probe.item()) != dist.get_world_size():
            raise PreflightError(
                f"all-reduce gave {probe.item()}, expected {dist.get_world_size()}"
            )
    except Exception as error:
        raise PreflightError(
            f"rank {dist.get_rank()} on {socket.gethostname()}: {error}"
        ) from error


def is_communication_error(error: BaseException) -> bool:
    """Whether an exception comes from a collective (peer lost, timeout), not from user code."""
    if isinstance(error, PreflightError):
        return False
    if isinstance(error, dist.DistError | TimeoutError | ConnectionError):
        return True
    text = str(error)
    return any(
        marker in text
        for marker in ("Gloo", "gloo", "NCCL", "Connection reset", "Connection closed", "timed out")
    )


def exit_code(error: BaseException) -> int:
    """The worker's exit code for `error` (see phalanx.models.exits)."""
    if isinstance(error, PreflightError):
        return exits.PREFLIGHT
    if is_communication_error(error):
        return exits.COMMUNICATION
    return exits.APPLICATION


@contextlib.contextmanager
def failures_as_exit_codes() -> Iterator[None]:
    """Run a worker body; on an exception, record it and exit with the matching code."""
    try:
        yield
    except SystemExit:
        raise
    except BaseException as error:
        code = exit_code(error)
        where = f"rank {os.environ.get('RANK', '?')} on {socket.gethostname()}"
        message = f"{where}: {type(error).__name__}: {error}"
        error_file = os.environ.get(ERROR_FILE_ENV)
        if error_file:
            Path(error_file).write_text(message[:4000])
        print(message, file=sys.stderr, flush=True)
        if code == exits.APPLICATION:
            raise
        os._exit(code)  # skip atexit: a broken process group can hang a clean shutdown
