"""The trainer's side of the env contract: the pod's and the worker's variables, parsed and checked.

Why a settings model: the operator sets these variables and the agent and workers read them. A
typo or a missing variable must fail at start-up with the variable's name, not later as a hang in
`init_process_group`. The names come from `phalanx.models.env`, the one module both sides import.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from phalanx.models import env


def _var(name: str) -> AliasChoices:
    """Read `name`, or torchrun's PET_ spelling of it, so either launcher's env works."""
    return AliasChoices(name, env.TORCHRUN_PREFIX + name)


class PodEnv(BaseSettings):
    """Variables the operator sets on every node pod (design §4)."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    master_addr: Annotated[str, Field(min_length=1, validation_alias=_var(env.MASTER_ADDR))]
    master_port: Annotated[int, Field(ge=1, le=65535, validation_alias=_var(env.MASTER_PORT))]
    nnodes: Annotated[int, Field(ge=1, validation_alias=_var(env.NNODES))]
    node_rank: Annotated[int, Field(ge=0, validation_alias=_var(env.NODE_RANK))]
    nproc_per_node: Annotated[int, Field(ge=1, validation_alias=_var(env.NPROC_PER_NODE))]

    job: str | None = Field(default=None, validation_alias=env.PHALANX_JOB)
    namespace: str | None = Field(default=None, validation_alias=env.PHALANX_NAMESPACE)
    epoch: Annotated[int, Field(ge=0, validation_alias=env.PHALANX_EPOCH)] = 0
    checkpoint_dir: str | None = Field(default=None, validation_alias=env.PHALANX_CHECKPOINT_DIR)
    checkpoint_url: str | None = Field(default=None, validation_alias=env.PHALANX_CHECKPOINT_URL)
    tensor_parallel: Annotated[int, Field(ge=1, validation_alias=env.PHALANX_TENSOR_PARALLEL)] = 1
    pipeline_parallel: Annotated[
        int, Field(ge=1, validation_alias=env.PHALANX_PIPELINE_PARALLEL)
    ] = 1
    data_parallel: Annotated[
        int | None, Field(ge=1, validation_alias=env.PHALANX_DATA_PARALLEL)
    ] = None
    heartbeat_lease: str | None = Field(default=None, validation_alias=env.PHALANX_HEARTBEAT_LEASE)

    @model_validator(mode="after")
    def _consistent(self) -> PodEnv:
        if self.node_rank >= self.nnodes:
            raise ValueError(f"{env.NODE_RANK}={self.node_rank} must be below {env.NNODES}")
        model_parallel = self.tensor_parallel * self.pipeline_parallel
        if self.world_size % model_parallel:
            tp, pp = env.PHALANX_TENSOR_PARALLEL, env.PHALANX_PIPELINE_PARALLEL
            raise ValueError(
                f"world size {self.world_size} is not a multiple of {tp} x {pp} = {model_parallel}"
            )
        if (
            self.data_parallel is not None
            and self.data_parallel != self.world_size // model_parallel
        ):
            raise ValueError(
                f"{env.PHALANX_DATA_PARALLEL}={self.data_parallel} disagrees with world size "
                f"{self.world_size} / {model_parallel}"
            )
        return self

    @property
    def world_size(self) -> int:
        """All worker processes of the epoch: nodes x processes per node."""
        return self.nnodes * self.nproc_per_node

    def worker_env(self, local_rank: int) -> dict[str, str]:
        """The per-worker variables the agent adds for local worker `local_rank`."""
        if not 0 <= local_rank < self.nproc_per_node:
            raise ValueError(f"local rank {local_rank} outside 0..{self.nproc_per_node - 1}")
        return {
            env.RANK: str(self.node_rank * self.nproc_per_node + local_rank),
            env.LOCAL_RANK: str(local_rank),
            env.WORLD_SIZE: str(self.world_size),
            env.LOCAL_WORLD_SIZE: str(self.nproc_per_node),
            env.GROUP_RANK: str(self.node_rank),
            env.ROLE_RANK: str(self.node_rank * self.nproc_per_node + local_rank),
            env.ROLE_WORLD_SIZE: str(self.world_size),
        }
