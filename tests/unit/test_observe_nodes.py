"""What the operator reads of a node: its readiness, and its labels, from which the planner takes
the GPU memory of jobs that do not give one (GPU Feature Discovery's nvidia.com/gpu.memory)."""

from __future__ import annotations

from phalanx.operator import observe


def test_a_node_view_keeps_readiness_and_the_labels_that_say_its_gpu_memory() -> None:
    node = observe.node_view({
        "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.memory": "81559", "pool": "a"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })  # fmt: skip
    assert (node.name, node.ready) == ("gpu-1", True)
    assert dict(node.labels)["pool"] == "a"
    assert node.gpu_memory == 81559 * 2**20
    bare = observe.node_view({"metadata": {"name": "cpu"}, "status": {}})
    assert (bare.ready, bare.labels, bare.gpu_memory) == (False, (), None)
