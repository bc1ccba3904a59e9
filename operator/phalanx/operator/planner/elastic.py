"""Elastic sizing: which node counts a job may run at, and which one to pick.

A size n is valid when min <= n <= max, n x nprocPerNode is a multiple of tensor x pipeline, so
the data-parallel degree stays an integer, and the job fits in GPU memory at n (with sharded
training fewer nodes mean bigger shards: see `memory`). The job always runs at the largest valid
size it can: no more than desired, no more than what can be scheduled.
"""

from __future__ import annotations

from phalanx.models.spec import TrainingJobSpec
from phalanx.operator.planner import memory


def is_valid_size(spec: TrainingJobSpec, nodes: int) -> bool:
    """Whether the job may run on `nodes` node pods."""
    world = nodes * spec.nproc_per_node
    return (
        spec.replicas.min <= nodes <= spec.replicas.max
        and world % spec.model_parallel_size == 0
        and memory.fits(spec, nodes)
    )


def largest_valid_size(spec: TrainingJobSpec, at_most: int) -> int | None:
    """The largest valid size not above `at_most` nor the desired size; None if below min."""
    for nodes in range(min(at_most, spec.desired_nodes), spec.replicas.min - 1, -1):
        if is_valid_size(spec, nodes):
            return nodes
    return None


def target_size(spec: TrainingJobSpec) -> int:
    """The size the job wants: the largest valid size up to desired; when desired is below the
    smallest size that fits in GPU memory, that size (min when memory sets no floor)."""
    size = largest_valid_size(spec, spec.desired_nodes)
    if size is not None:
        return size
    return memory.floor(spec) or spec.replicas.min


def floor_reason(spec: TrainingJobSpec) -> str:
    """Why the job cannot run smaller: its min, or the smallest size that fits in GPU memory."""
    floor = memory.floor(spec)
    if floor is not None and floor > spec.replicas.min:
        return f"{floor} is the fewest that fit in GPU memory (min is {spec.replicas.min})"
    return f"min is {spec.replicas.min}"


def data_parallel_degree(spec: TrainingJobSpec, nodes: int) -> int:
    """Model replicas at this size: world / (tensor x pipeline)."""
    return nodes * spec.nproc_per_node // spec.model_parallel_size
