"""The env contract between the operator, the agent and the workers: every reserved name, once.

Why one module: the operator sets these variables on node pods, the trainer reads them, and the
CRD refuses user env that collides with them. If each side spelled the names itself they would
drift; here a rename is one edit and the contract test (operator builder → trainer settings)
catches the rest. Nothing here imports anything but the standard library, so every part may
import it, the agent too (it runs in any image's python3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Per pod, set by the operator (design §4). The same values go out as torchrun's PET_* variables so
# an unmodified `torchrun train.py` container works.
MASTER_ADDR: Final = "MASTER_ADDR"
MASTER_PORT: Final = "MASTER_PORT"
NNODES: Final = "NNODES"
NODE_RANK: Final = "NODE_RANK"
NPROC_PER_NODE: Final = "NPROC_PER_NODE"

TORCHRUN_PREFIX: Final = "PET_"
"""torchrun reads `PET_<FLAG>` for each of its flags, e.g. PET_NNODES, PET_NODE_RANK."""

TORCHRUN_MIRRORED: Final = (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE)
"""The pod variables that are also published as PET_<NAME>."""

# Per worker process, set by the agent (or torchrun); with nprocPerNode 1 also on the pod itself,
# which is then its one worker (the PyTorchJob contract: `python train.py` as the command).
RANK: Final = "RANK"
LOCAL_RANK: Final = "LOCAL_RANK"
WORLD_SIZE: Final = "WORLD_SIZE"
LOCAL_WORLD_SIZE: Final = "LOCAL_WORLD_SIZE"
GROUP_RANK: Final = "GROUP_RANK"
ROLE_RANK: Final = "ROLE_RANK"
ROLE_WORLD_SIZE: Final = "ROLE_WORLD_SIZE"
GROUP_WORLD_SIZE: Final = "GROUP_WORLD_SIZE"
ROLE_NAME: Final = "ROLE_NAME"
ROLE: Final = "default"
"""torchrun's role name (its --role flag's default): one role, every worker of the job."""

# The rest of torchrun's worker contract (torch.distributed.elastic's LocalElasticAgent), so that a
# script written for torchrun finds every variable it may read at its first line.
TORCHELASTIC_RESTART_COUNT: Final = "TORCHELASTIC_RESTART_COUNT"
"""How many times the gang has been restarted: 0 in the job's first epoch (epoch 1), one more
with each restart, in place or not (`restart_count`). torchrun counts only its failure
restarts; Phalanx restarts the gang for a resize too, and every rank of an epoch reads the same
count (a torchrun node that joins late reads 0)."""
TORCHELASTIC_MAX_RESTARTS: Final = "TORCHELASTIC_MAX_RESTARTS"
"""spec.failurePolicy.maxRestarts: the restarts for the program's own failures."""
TORCHELASTIC_RUN_ID: Final = "TORCHELASTIC_RUN_ID"
"""The job's uid (its name where it has none, locally): one id for the job's whole life, every
restart included. torch's `is_torchelastic_launched()` is true when it is set."""
TORCHELASTIC_USE_AGENT_STORE: Final = "TORCHELASTIC_USE_AGENT_STORE"
"""Always False: no launcher hosts a store for the workers; rank 0 hosts the epoch's TCPStore at
MASTER_ADDR:MASTER_PORT (torchrun says True where its agent hosts one)."""
TORCHELASTIC_ERROR_FILE: Final = "TORCHELASTIC_ERROR_FILE"
"""Where torch's `@record` writes a worker's exception (JSON); the agent reads it as a failure's
reason, as torchrun does."""
TORCHELASTIC_SIGNALS_TO_HANDLE: Final = "TORCHELASTIC_SIGNALS_TO_HANDLE"
"""The signals the launcher passes on to its workers: the agent passes SIGTERM (a pod deleted or
drained: the workers checkpoint and stop); torchrun lists SIGTERM,SIGINT,SIGHUP,SIGQUIT."""
AGENT_SIGNALS: Final = "SIGTERM"
OMP_NUM_THREADS: Final = "OMP_NUM_THREADS"
"""Set to 1 for the workers of a pod with several, unless the pod sets it: torchrun's default."""

# Phalanx's own variables.
PHALANX_PREFIX: Final = "PHALANX_"
PHALANX_JOB: Final = "PHALANX_JOB"
PHALANX_NAMESPACE: Final = "PHALANX_NAMESPACE"
PHALANX_EPOCH: Final = "PHALANX_EPOCH"
PHALANX_CHECKPOINT_DIR: Final = "PHALANX_CHECKPOINT_DIR"
PHALANX_CHECKPOINT_URL: Final = "PHALANX_CHECKPOINT_URL"
PHALANX_CHECKPOINT_MEMORY_DIR: Final = "PHALANX_CHECKPOINT_MEMORY_DIR"
"""The pod's directory in host memory (tmpfs) for its workers' memory snapshots; the agent
picks one under /dev/shm when it is not set, and removes it when it exits."""
PHALANX_CHECKPOINT_INTERVAL_STEPS: Final = "PHALANX_CHECKPOINT_INTERVAL_STEPS"
PHALANX_CHECKPOINT_INTERVAL_SECONDS: Final = "PHALANX_CHECKPOINT_INTERVAL_SECONDS"
PHALANX_CHECKPOINT_KEEP: Final = "PHALANX_CHECKPOINT_KEEP"
PHALANX_CHECKPOINT_ASYNC: Final = "PHALANX_CHECKPOINT_ASYNC"
PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS: Final = "PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS"
PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT: Final = "PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT"
"""spec.checkpoint's cadence and retention, for every program: the resume library
(`phalanx.resume`) reads them, so the reference trainer and any script using it save as the spec
says (see `checkpoint`)."""
PHALANX_COLLECTIVE_TIMEOUT_SECONDS: Final = "PHALANX_COLLECTIVE_TIMEOUT_SECONDS"
"""spec.nccl.timeoutSeconds, when set: the process group's collective timeout once training
runs, which the resume library applies after the first step (torch reads no variable for it)."""
PHALANX_TENSOR_PARALLEL: Final = "PHALANX_TENSOR_PARALLEL"
PHALANX_PIPELINE_PARALLEL: Final = "PHALANX_PIPELINE_PARALLEL"
PHALANX_DATA_PARALLEL: Final = "PHALANX_DATA_PARALLEL"
PHALANX_HEARTBEAT_LEASE: Final = "PHALANX_HEARTBEAT_LEASE"
PHALANX_HEARTBEAT_FILE: Final = "PHALANX_HEARTBEAT_FILE"
"""If set, node rank 0's agent writes the heartbeat to this file instead of the Lease (local)."""
PHALANX_HANG_TIMEOUT_SECONDS: Final = "PHALANX_HANG_TIMEOUT_SECONDS"
"""spec.failurePolicy.hangTimeoutSeconds, when set: how long the agent lets a worker stay
stopped (SIGSTOP) before it fails the gang (STOPPED_WORKER_SECONDS unset), for any program."""
STOPPED_WORKER_SECONDS: Final = 10.0
"""How long a worker may stay stopped when hangTimeoutSeconds is unset: the agent's default,
and what the job's status says applies."""
PHALANX_HEARTBEAT_SECONDS: Final = "PHALANX_HEARTBEAT_SECONDS"
"""How often the agent publishes the heartbeat (default 2 s; the local backend asks for less)."""
PHALANX_TERMINATION_LOG: Final = "PHALANX_TERMINATION_LOG"
"""Where the agent writes its one-line failure reason (default: the pod's /dev/termination-log)."""
PHALANX_POD_NAME: Final = "PHALANX_POD_NAME"
"""The pod's own name (downward API), the key of its rank in an epoch's assignment."""
PHALANX_ASSIGNMENT_FILE: Final = "PHALANX_ASSIGNMENT_FILE"
"""Where the agent reads each epoch's assignment (in-place restarts; see phalanx.models.assignment).
Unset: the pod runs the one epoch its env describes and exits, as before in-place restarts."""
PHALANX_AGENT_REPORT_FILE: Final = "PHALANX_AGENT_REPORT_FILE"
"""Where the agent writes its state for the operator (with PHALANX_ASSIGNMENT_FILE)."""
PHALANX_STANDBY: Final = "PHALANX_STANDBY"
"""1 on a standby pod (a hot spare): its agent starts no epoch until an assignment names it."""
PHALANX_ASSIGNMENT_LEASE: Final = "PHALANX_ASSIGNMENT_LEASE"
"""On a cluster: the Lease the agent watches for each epoch's assignment; it then reports its
state on the heartbeat Lease (PHALANX_HEARTBEAT_LEASE)."""
PHALANX_WORKER_ERROR_FILE: Final = "PHALANX_WORKER_ERROR_FILE"
"""Where a worker writes why it failed; the agent copies it into the termination message."""
PHALANX_PROGRESS_FILE: Final = "PHALANX_PROGRESS_FILE"
"""Where global rank 0 writes its heartbeat JSON for the agent to publish."""
PHALANX_SPAWNED_AT: Final = "PHALANX_SPAWNED_AT"
"""Wall time (epoch seconds) the agent started the worker: the first part of a restart's cost."""
PHALANX_AGENT_PID: Final = "PHALANX_AGENT_PID"
"""The pid of the agent that started the worker: a warm worker, forked by the fork server, exits at
once if the agent died before the worker could tie its life to the server's."""
PHALANX_PARENT_PID: Final = "PHALANX_PARENT_PID"
"""Set by the local backend on each agent: the pid of `phalanx run`. The agent dies with it (and
exits at once if it is gone already); unset in a pod, where the agent may be PID 1."""
PHALANX_PHASE_FILE: Final = "PHALANX_PHASE_FILE"
"""Where a worker writes the start-up phase it entered; its agent reports the least advanced."""
PHALANX_FAULT_DIR: Final = "PHALANX_FAULT_DIR"
"""Local runs only: faults armed to strike when a worker enters a phase (`phalanx run
--hang-node-at loading`); see phalanx.phases."""
FAULT_ARMED_SUFFIX: Final = ".armed"
"""A file in PHALANX_FAULT_DIR ending so is a fault waiting for a worker to enter its phase."""
FAULT_STRUCK_SUFFIX: Final = ".struck"
"""Renamed so by the worker that struck it, with when and where."""

TORCHELASTIC_PREFIX: Final = "TORCHELASTIC_"
TORCH_NCCL_ASYNC_ERROR_HANDLING: Final = "TORCH_NCCL_ASYNC_ERROR_HANDLING"

RESERVED_NAMES: Final = frozenset(
    {
        MASTER_ADDR,
        MASTER_PORT,
        NNODES,
        NODE_RANK,
        NPROC_PER_NODE,
        RANK,
        LOCAL_RANK,
        WORLD_SIZE,
        LOCAL_WORLD_SIZE,
        GROUP_RANK,
        ROLE_RANK,
        ROLE_WORLD_SIZE,
        GROUP_WORLD_SIZE,
        ROLE_NAME,
        TORCH_NCCL_ASYNC_ERROR_HANDLING,
    }
)
"""Exact names a user may not set in `spec.template`: Phalanx owns them."""

RESERVED_PREFIXES: Final = (TORCHRUN_PREFIX, PHALANX_PREFIX, TORCHELASTIC_PREFIX)
"""Name prefixes a user may not set in `spec.template`: whole families Phalanx owns."""


def is_reserved(name: str) -> bool:
    """Whether `name` is an env variable that Phalanx sets and a user therefore may not."""
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def spellings(name: str) -> tuple[str, ...]:
    """`name` and, for a rendezvous variable, torchrun's PET_ spelling of it: the names that one
    value goes out under."""
    return (name, TORCHRUN_PREFIX + name) if name in TORCHRUN_MIRRORED else (name,)


def with_torchrun_spelling(values: Mapping[str, str]) -> dict[str, str]:
    """`values`, each rendezvous variable among them also in torchrun's PET_ spelling: the one
    writer of the mirror (the pod builder, the agent and the local backend call it)."""
    return {spelled: value for name, value in values.items() for spelled in spellings(name)}


def rendezvous(
    master_addr: str, master_port: int, nodes: int, node_rank: int, nproc_per_node: int
) -> dict[str, str]:
    """A node pod's rendezvous variables, also in torchrun's PET_ spelling: the one writer the
    operator's pod builder and the agent (for each new epoch of a pod it keeps) both call."""
    values = {
        MASTER_ADDR: master_addr,
        MASTER_PORT: str(master_port),
        NNODES: str(nodes),
        NODE_RANK: str(node_rank),
        NPROC_PER_NODE: str(nproc_per_node),
    }
    return with_torchrun_spelling(values)


def single_worker(node_rank: int, nodes: int) -> dict[str, str]:
    """The worker variables of a pod that is its only worker (nprocPerNode 1): the PyTorchJob
    contract, so that `python train.py` as the container's command runs as rank `node_rank`."""
    return worker(node_rank, nodes, 1, 0)


def worker(node_rank: int, nodes: int, nproc_per_node: int, local_rank: int) -> dict[str, str]:
    """The variables a launcher (the agent, as torchrun would) sets on local worker
    `local_rank` of node `node_rank`: ranks and sizes with torchrun's meanings (one role, so a
    role rank is the global rank and a group is a node)."""
    if not 0 <= local_rank < nproc_per_node:
        raise ValueError(f"local rank {local_rank} outside 0..{nproc_per_node - 1}")
    rank = node_rank * nproc_per_node + local_rank
    world = nodes * nproc_per_node
    return {
        RANK: str(rank),
        LOCAL_RANK: str(local_rank),
        WORLD_SIZE: str(world),
        LOCAL_WORLD_SIZE: str(nproc_per_node),
        GROUP_RANK: str(node_rank),
        GROUP_WORLD_SIZE: str(nodes),
        ROLE_RANK: str(rank),
        ROLE_WORLD_SIZE: str(world),
    }


def restart_count(epoch: int) -> str:
    """TORCHELASTIC_RESTART_COUNT in `epoch`: the restarts before it (the first epoch is 1)."""
    return str(max(epoch - 1, 0))


def elastic(run_id: str, max_restarts: int) -> dict[str, str]:
    """torchrun's variables that are the same for every worker of a job in every epoch."""
    return {
        ROLE_NAME: ROLE,
        TORCHELASTIC_RUN_ID: run_id,
        TORCHELASTIC_MAX_RESTARTS: str(max_restarts),
        TORCHELASTIC_USE_AGENT_STORE: str(False),
    }


def checkpoint(
    interval_steps: int,
    keep: int,
    async_save: bool,
    memory_interval_steps: int,
    interval_seconds: int | None = None,
    memory_overhead_percent: int = 1,
) -> dict[str, str]:
    """spec.checkpoint's cadence as variables: the operator writes them on every node pod, the
    resume library (`phalanx.resume.settings`) reads them."""
    values = {
        PHALANX_CHECKPOINT_INTERVAL_STEPS: str(interval_steps),
        PHALANX_CHECKPOINT_KEEP: str(keep),
        PHALANX_CHECKPOINT_ASYNC: "true" if async_save else "false",
        PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS: str(memory_interval_steps),
        PHALANX_CHECKPOINT_MEMORY_OVERHEAD_PERCENT: str(memory_overhead_percent),
    }
    if interval_seconds is not None:
        values[PHALANX_CHECKPOINT_INTERVAL_SECONDS] = str(interval_seconds)
    return values


def data_parallel(nodes: int, nproc_per_node: int, tensor: int, pipeline: int) -> int:
    """The data-parallel degree of `nodes` pods: world / (tensor x pipeline)."""
    return nodes * nproc_per_node // (tensor * pipeline)
