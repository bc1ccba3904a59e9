"""The trainer's side of the env contract: the pod's and the worker's variables, parsed and checked.

Why checked at start-up: the operator sets these variables and the agent and workers read them.
A typo or a missing variable must fail at once with the variable's name, not later as a hang in
`init_process_group`. The names come from `phalanx.models.env`, the one module both sides import.

Why the standard library only: the agent reads them too, and it runs in any image's `python3`
(injected into the pod), where pydantic is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from phalanx.models import env

T = TypeVar("T")


class EnvError(ValueError):
    """A variable of the contract is missing, malformed or inconsistent; the message names it."""


def _lookup(values: Mapping[str, str], name: str, pet: bool) -> str | None:
    """`name`, else torchrun's PET_ spelling of it (for the rendezvous variables)."""
    if name in values:
        return values[name]
    return values.get(env.TORCHRUN_PREFIX + name) if pet else None


def _read(
    values: Mapping[str, str],
    name: str,
    parse: Callable[[str], T],
    default: T | None = None,
    minimum: int | None = None,
    pet: bool = False,
) -> T:
    raw = _lookup(values, name, pet)
    if raw is None or raw == "":
        if default is None:
            raise EnvError(f"{name} is not set")
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a valid {parse.__name__}") from None
    if minimum is not None and isinstance(value, int) and value < minimum:
        raise EnvError(f"{name}={raw} must be at least {minimum}")
    return value


def _optional(values: Mapping[str, str], name: str) -> str | None:
    return values.get(name) or None


@dataclass(frozen=True)
class PodEnv:
    """Variables the operator sets on every node pod (design §4)."""

    master_addr: str
    master_port: int
    nnodes: int
    node_rank: int
    nproc_per_node: int
    job: str | None = None
    namespace: str | None = None
    epoch: int = 0
    checkpoint_dir: str | None = None
    checkpoint_url: str | None = None
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int | None = None
    heartbeat_lease: str | None = None

    @classmethod
    def read(cls, values: Mapping[str, str] | None = None) -> PodEnv:
        """The contract from `values` (default: this process's environment), or `EnvError`
        naming the first variable that is wrong."""
        v = os.environ if values is None else values
        port = _read(v, env.MASTER_PORT, int, pet=True, minimum=1)
        if port > 65535:
            raise EnvError(f"{env.MASTER_PORT}={port} must be at most 65535")
        data_parallel = _lookup(v, env.PHALANX_DATA_PARALLEL, pet=False)
        pod = cls(
            master_addr=_read(v, env.MASTER_ADDR, str, pet=True),
            master_port=port,
            nnodes=_read(v, env.NNODES, int, pet=True, minimum=1),
            node_rank=_read(v, env.NODE_RANK, int, pet=True, minimum=0),
            nproc_per_node=_read(v, env.NPROC_PER_NODE, int, pet=True, minimum=1),
            job=_optional(v, env.PHALANX_JOB),
            namespace=_optional(v, env.PHALANX_NAMESPACE),
            epoch=_read(v, env.PHALANX_EPOCH, int, default=0, minimum=0),
            checkpoint_dir=_optional(v, env.PHALANX_CHECKPOINT_DIR),
            checkpoint_url=_optional(v, env.PHALANX_CHECKPOINT_URL),
            tensor_parallel=_read(v, env.PHALANX_TENSOR_PARALLEL, int, default=1, minimum=1),
            pipeline_parallel=_read(v, env.PHALANX_PIPELINE_PARALLEL, int, default=1, minimum=1),
            data_parallel=(
                _read(v, env.PHALANX_DATA_PARALLEL, int, minimum=1) if data_parallel else None
            ),
            heartbeat_lease=_optional(v, env.PHALANX_HEARTBEAT_LEASE),
        )
        pod._check()
        return pod

    def _check(self) -> None:
        if self.node_rank >= self.nnodes:
            raise EnvError(f"{env.NODE_RANK}={self.node_rank} must be below {env.NNODES}")
        model_parallel = self.tensor_parallel * self.pipeline_parallel
        if self.world_size % model_parallel:
            tp, pp = env.PHALANX_TENSOR_PARALLEL, env.PHALANX_PIPELINE_PARALLEL
            raise EnvError(
                f"world size {self.world_size} is not a multiple of {tp} x {pp} = {model_parallel}"
            )
        if (
            self.data_parallel is not None
            and self.data_parallel != self.world_size // model_parallel
        ):
            raise EnvError(
                f"{env.PHALANX_DATA_PARALLEL}={self.data_parallel} disagrees with world size "
                f"{self.world_size} / {model_parallel}"
            )

    @property
    def world_size(self) -> int:
        """All worker processes of the epoch: nodes x processes per node."""
        return self.nnodes * self.nproc_per_node

    def worker_env(self, local_rank: int) -> dict[str, str]:
        """The per-worker variables the agent adds for local worker `local_rank`."""
        return env.worker(self.node_rank, self.nnodes, self.nproc_per_node, local_rank)

    def launcher_env(self, values: Mapping[str, str]) -> dict[str, str]:
        """What the agent, as the pod's launcher, adds for all its workers, as torchrun does:
        the signals it passes on, and OMP_NUM_THREADS=1 with several workers unless `values`
        (the pod's env) sets it."""
        added = {env.TORCHELASTIC_SIGNALS_TO_HANDLE: env.AGENT_SIGNALS}
        if self.nproc_per_node > 1 and env.OMP_NUM_THREADS not in values:
            added[env.OMP_NUM_THREADS] = "1"
        return added
