"""An epoch's assignment as the pod's environment: what the workers of that epoch read.

Why a module of its own: the operator writes a new pod's variables with the same writer
(`phalanx.models.env`), and a carried-over pod must end up with exactly the variables a new pod
of the epoch would have; `tests/unit/test_env_contract.py` holds the two to one result.
"""

from __future__ import annotations

from phalanx.agent.wire import Assignment
from phalanx.models import env as contract
from phalanx.pod import PodEnv


def epoch_env(base: dict[str, str], assignment: Assignment, node_rank: int) -> dict[str, str]:
    """The pod's env with an epoch's assignment in place of the values it was created with
    (RANK and WORLD_SIZE too where the pod has them, nprocPerNode 1: a carried-over pod may get
    another rank, and what its program reads must follow). The same writer as the operator's."""
    nproc = int(base.get(contract.NPROC_PER_NODE, "1"))
    merged = {
        **base,
        **contract.rendezvous(
            assignment.master_addr, assignment.master_port, assignment.nodes, node_rank, nproc
        ),
        contract.PHALANX_EPOCH: str(assignment.epoch),
        contract.TORCHELASTIC_RESTART_COUNT: contract.restart_count(assignment.epoch),
    }
    if contract.RANK in base:  # a pod that is its only worker carries its worker's ranks too
        merged |= contract.single_worker(node_rank, assignment.nodes)
    if contract.PHALANX_DATA_PARALLEL in base:
        degree = contract.data_parallel(
            assignment.nodes,
            nproc,
            int(base.get(contract.PHALANX_TENSOR_PARALLEL, "1")),
            int(base.get(contract.PHALANX_PIPELINE_PARALLEL, "1")),
        )
        merged[contract.PHALANX_DATA_PARALLEL] = str(degree)
    return merged


def static_assignment(pod: PodEnv, name: str) -> Assignment:
    """The one epoch a pod without an assignment channel runs: the one its env describes."""
    return Assignment(
        epoch=pod.epoch, nodes=pod.nnodes, master_addr=pod.master_addr,
        master_port=pod.master_port, ranks={name: pod.node_rank},
    )  # fmt: skip
