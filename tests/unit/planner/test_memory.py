"""The memory model and the shrink floor it sets.

Covers: the classic mixed-precision Adam accounting (2 + 2 + 12 bytes a parameter) divided as
each strategy divides it (DDP nothing; ZeRO-1 the optimizer state; ZeRO-2 plus gradients; ZeRO-3
plus weights; HSDP all three within a pod), tensor and pipeline parallelism dividing the states,
activations with and without recomputation; memory quantities; and the planner, which never
shrinks a job below the smallest size that fits (it waits for capacity instead), starts a job
scaled below that size at it, and fails one that fits at no size at once, saying why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from phalanx.models import TrainingJob
from phalanx.models.labels import KUEUE_QUEUE
from phalanx.models.memory import ModelDescription, quantity_bytes
from phalanx.operator.planner import CreateNodePod, EnsureWorkload, NodeView, Observed
from phalanx.operator.planner import memory as mem
from tests.unit.planner.builders import at, job, pods, step

PHI = 10**9
MODEL = ModelDescription(
    parameters=PHI, layers=10, hidden=1000, sequence_length=1000, micro_batch_size=1,
    precision="mixed", sharding="zero3",
)  # fmt: skip
ACTIVATIONS = 10 * 34 * 1000 * 1000  # layers x 34 s b h, 16-bit


def estimate(model: ModelDescription = MODEL, nodes: int = 4, **spec: Any) -> mem.Estimate:
    """Per-GPU estimate on `nodes` pods of 2 processes (the builders' job: min 2, max 4)."""
    return mem.estimate(job(**spec).spec, model, nodes)


@pytest.mark.parametrize(
    ("sharding", "weights", "gradients", "optimizer"),
    [
        ("ddp", 2 * PHI, 2 * PHI, 12 * PHI),
        ("zero1", 2 * PHI, 2 * PHI, 12 * PHI // 8),
        ("zero2", 2 * PHI, 2 * PHI // 8, 12 * PHI // 8),
        ("zero3", 2 * PHI // 8, 2 * PHI // 8, 12 * PHI // 8),
        ("hsdp", 2 * PHI // 2, 2 * PHI // 2, 12 * PHI // 2),  # sharded over a pod's 2 ranks
    ],
)
def test_each_strategy_divides_the_16_bytes_a_parameter_over_the_8_ranks_as_it_shards(
    sharding: Any, weights: int, gradients: int, optimizer: int
) -> None:
    row = estimate(MODEL.model_copy(update={"sharding": sharding}))
    assert (row.data_parallel, row.weights, row.gradients, row.optimizer) == (
        8, weights, gradients, optimizer,
    )  # fmt: skip
    assert row.activations == ACTIVATIONS


def test_fp32_keeps_4_4_8_bytes_a_parameter_and_fp32_activations() -> None:
    row = estimate(MODEL.model_copy(update={"precision": "fp32", "sharding": "ddp"}))
    assert (row.weights, row.gradients, row.optimizer) == (4 * PHI, 4 * PHI, 8 * PHI)
    assert row.activations == 2 * ACTIVATIONS


def test_tensor_and_pipeline_parallelism_divide_the_states_and_tp_the_activations() -> None:
    row = estimate(
        MODEL.model_copy(update={"sharding": "ddp"}), nprocPerNode=4,
        parallelism={"tensor": 2, "pipeline": 2},
    )  # fmt: skip
    assert row.data_parallel == 4  # 16 ranks / (2 x 2)
    assert (row.weights, row.optimizer) == (2 * PHI // 4, 12 * PHI // 4)
    assert row.activations == ACTIVATIONS // 2  # 1F1B: L layers' worth on the first stage, / t


def test_recomputation_keeps_each_layers_input_and_one_layer_at_a_time() -> None:
    row = estimate(MODEL.model_copy(update={"activation_checkpointing": True}))
    assert row.activations == 10 * 2 * 1000 * 1000 + 34 * 1000 * 1000


def test_shrinking_a_sharded_job_grows_its_shards_but_not_a_ddp_jobs() -> None:
    sharded = [estimate(nodes=n).total for n in (2, 3, 4)]
    assert sharded[0] > sharded[1] > sharded[2]
    replicated = {
        estimate(MODEL.model_copy(update={"sharding": "ddp"}), nodes=n).total for n in (2, 3, 4)
    }
    assert len(replicated) == 1


@pytest.mark.parametrize(
    ("text", "size"),
    [("80Gi", 80 * 2**30), ("80GiB", 80 * 2**30), ("141G", 141 * 10**9), ("1.5Mi", 3 * 2**19),
     ("4096", 4096)],
)  # fmt: skip
def test_memory_quantities(text: str, size: int) -> None:
    assert quantity_bytes(text) == size


@pytest.mark.parametrize("text", ["80 GB", "Gi", "-1Gi", "80gb"])
def test_a_bad_quantity_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match="such as 80Gi"):
        quantity_bytes(text)


MODEL_SPEC = {"parameters": PHI, "layers": 10, "hidden": 1000, "sequenceLength": 1000}
"""zero3, mixed: 16 GB of states / (2 x nodes) ranks + 0.34 GB of activations per GPU."""


def fitting_at_3_of_4(**spec: Any) -> Any:
    """A job whose states are 16 GB: per GPU 4.34 GB at 2 nodes, 3.0 at 3, 2.34 at 4, with
    4G a GPU (3.6 GB usable): it fits at 3 and 4 nodes only."""
    return job(memory={"gpuMemory": "4G", "model": MODEL_SPEC}, **spec)


def test_the_floor_is_the_smallest_size_that_fits() -> None:
    spec = fitting_at_3_of_4().spec
    assert [row.fits for row in mem.table(spec, 4 * 10**9) or []] == [False, True, True]
    assert mem.floor(spec) == 3
    assert mem.floor(job().spec) == 2, "no memory in the spec: min is the floor"


def sized(j: TrainingJob) -> tuple[int, int]:
    """The job's epoch and node count."""
    assert j.status is not None
    return j.status.epoch, j.status.nodes


def test_a_lost_node_does_not_shrink_a_job_below_its_floor_it_waits_for_capacity() -> None:
    j, _ = step(fitting_at_3_of_4(), Observed(), at(0))
    j, _ = step(j, Observed(pods=tuple(pods(1, 4))), at(10))
    lost = {"node-3": NodeView("node-3", ready=False)}
    j, _ = step(j, Observed(pods=tuple(pods(1, 4)), nodes=lost), at(20))
    assert sized(j) == (2, 3), "3 fits: the restart runs at what runs"
    j, _ = step(j, Observed(), at(21))
    j, _ = step(j, Observed(pods=tuple(pods(2, 3))), at(22))
    lost = {"node-2": NodeView("node-2", ready=False)}
    j, _ = step(j, Observed(pods=tuple(pods(2, 3)), nodes=lost), at(30))
    assert sized(j) == (3, 3), "2 would not fit: it stays at 3"
    j, plan = step(j, Observed(nodes=lost), at(31))
    assert len(plan.of_type(CreateNodePod)) == 3
    waiting = pods(3, 3)
    waiting[2] = replace(waiting[2], phase="Pending", node_name=None)
    j, _ = step(j, Observed(pods=tuple(waiting)), at(32))
    j, _ = step(j, Observed(pods=tuple(waiting)), at(32 + 300))  # past scheduleTimeoutSeconds
    assert sized(j) == (3, 3), "no shrink into an OOM"
    assert j.status is not None
    [unschedulable] = [c for c in j.status.conditions if c.type == "Unschedulable"]
    assert unschedulable.status == "True"
    assert "3 is the fewest that fit in GPU memory (min is 2)" in unschedulable.message


def test_a_job_scaled_below_its_floor_starts_at_the_floor() -> None:
    j, _ = step(fitting_at_3_of_4(replicas={"min": 2, "max": 4, "desired": 2}), Observed(), at(0))
    assert j.status is not None
    assert j.status.nodes == 3


def test_a_job_that_fits_at_no_size_fails_at_once_saying_what_it_needs() -> None:
    j, plan = step(job(memory={"gpuMemory": "2G", "model": MODEL_SPEC}), Observed(), at(0))
    assert j.status is not None
    assert j.status.phase == "Failed"
    assert not plan.of_type(CreateNodePod)
    [failed] = [c for c in j.status.conditions if c.type == "Failed"]
    assert failed.reason == "DoesNotFitInMemory"
    assert failed.message == (
        "the job does not fit in GPU memory at any size: at 4 nodes (replicas.max) each GPU "
        "needs 2.2 GiB, and 1.7 GiB of its 1.9 GiB (spec.memory.gpuMemory 2G) may be used (10% "
        "kept free); `phalanx plan` shows each part"
    )


@pytest.mark.parametrize(
    ("labels", "size"),
    [
        ({"nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
         81559 * 2**20),
        ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, 40 * 10**9),
        ({"nvidia.com/gpu.product": "NVIDIA-H200"}, None),
        ({}, None),
    ],
)  # fmt: skip
def test_a_nodes_gpu_memory_comes_from_gpu_feature_discoverys_labels(
    labels: dict[str, str], size: int | None
) -> None:
    assert mem.node_gpu_memory(labels) == size


def gpu_node(name: str, mib: int, **labels: str) -> NodeView:
    """A node as the operator observes it (`observe.node_view`)."""
    every = {"nvidia.com/gpu.memory": str(mib), **labels}
    return NodeView(name, True, tuple(sorted(every.items())), mem.node_gpu_memory(every))


def test_without_gpu_memory_in_the_spec_the_least_of_the_nodes_gpus_sets_the_floor() -> None:
    """4000 MB GPUs (as MODEL_SPEC's floor of 3 needs) on one node, 80 GiB on another: the job
    may land on either, so it plans for the smaller; a nodeSelector that admits only the larger
    lets it run at 2."""
    scaled = {"replicas": {"min": 2, "max": 4, "desired": 2}, "memory": {"model": MODEL_SPEC}}
    nodes = {"small": gpu_node("small", 3815, pool="a"), "big": gpu_node("big", 81920, pool="b")}
    j, _ = step(job(**scaled), Observed(nodes=nodes), at(0))
    assert sized(j) == (1, 3)
    pinned = job(**scaled, template={"spec": {
        "containers": [{"name": "t", "image": "img"}], "nodeSelector": {"pool": "b"}}})  # fmt: skip
    j, _ = step(pinned, Observed(nodes=nodes), at(0))
    assert sized(j) == (1, 2)
    j, _ = step(job(**scaled), Observed(nodes={"cpu": NodeView("cpu", ready=True)}), at(0))
    assert sized(j) == (1, 2), "no GPU labels: no floor"


def test_a_job_too_big_for_the_least_of_its_nodes_gpus_is_not_failed_for_it() -> None:
    """It may be meant for the larger GPUs: only a gpuMemory the user gave fails a job."""
    nodes = {"small": gpu_node("small", 1907), "big": gpu_node("big", 81920)}
    j, _ = step(job(memory={"model": MODEL_SPEC}), Observed(nodes=nodes), at(0))
    assert j.status is not None
    assert (j.status.phase, j.status.nodes) == ("Pending", 4)


def test_memory_snapshots_hold_two_slots_of_each_shard_and_a_buddys_copy() -> None:
    """zero3, mixed, at 2 nodes x 2: each rank's shard at rest is 2 + 12 bytes a parameter over
    4 ranks; a pod holds two slots of each of its 2 ranks' shards and of their buddies'."""
    spec = fitting_at_3_of_4().spec
    assert mem.snapshot_request(spec) == 2 * 2 * 2 * (PHI * 2 // 4 + PHI * 12 // 4)
    rows = mem.table(spec, None) or []
    assert [r.nodes for r in rows] == [2, 3, 4]
    assert rows[0].host_snapshots > rows[1].host_snapshots > rows[2].host_snapshots, (
        "fewer nodes, bigger shards: the pod's request takes the largest"
    )
    off = fitting_at_3_of_4(checkpoint={"dir": "/ckpt", "memoryIntervalSteps": 0}).spec
    assert mem.snapshot_request(off) == 0


def test_the_pods_the_planner_asks_for_carry_their_snapshots_memory() -> None:
    """The builders decide nothing: each pod's added memory is the planner's figure, in its
    action; none when snapshots are off."""
    spec = fitting_at_3_of_4()
    _, plan = step(spec, Observed(), at(0))
    created = plan.of_type(CreateNodePod)
    assert created, plan.actions
    assert {a.snapshot_bytes for a in created} == {mem.snapshot_request(spec.spec)} != {0}
    off = fitting_at_3_of_4(checkpoint={"dir": "/ckpt", "memoryIntervalSteps": 0})
    _, plan = step(off, Observed(), at(0))
    assert {a.snapshot_bytes for a in plan.of_type(CreateNodePod)} == {0}
    queue = {"metadata": spec.metadata.model_copy(update={"labels": {KUEUE_QUEUE: "team-a"}})}
    _, plan = step(spec.model_copy(update=queue), Observed(workloads_supported=True), at(0))
    [workload] = plan.of_type(EnsureWorkload)
    assert workload.snapshot_bytes == mem.snapshot_request(spec.spec), "Kueue counts them too"


def own_shm(size_limit: str, **spec: Any) -> Any:
    """The job with its own /dev/shm: an emptyDir of `size_limit`."""
    container = {"name": "t", "image": "img",
                 "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}  # fmt: skip
    template = {"spec": {"containers": [container], "volumes": [
        {"name": "data", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": size_limit}},
    ]}}  # fmt: skip
    return job(memory={"model": MODEL_SPEC}, template=template, **spec)


def test_a_job_whose_own_dev_shm_cannot_hold_its_snapshots_fails_naming_the_fields() -> None:
    j, plan = step(own_shm("10Gi"), Observed(), at(0))
    assert j.status is not None
    assert j.status.phase == "Failed"
    assert not plan.of_type(CreateNodePod)
    [failed] = [c for c in j.status.conditions if c.type == "Failed"]
    assert failed.reason == "DoesNotFitInMemory"
    assert "spec.template.spec.volumes[1].emptyDir.sizeLimit is 10Gi" in failed.message
    assert "spec.checkpoint.memoryIntervalSteps" in failed.message
    for fits in (
        own_shm("64Gi"),
        own_shm("10Gi", checkpoint={"dir": "/c", "memoryIntervalSteps": 0}),
    ):
        j, plan = step(fits, Observed(), at(0))
        assert j.status is not None
        assert j.status.phase != "Failed", j.status.conditions
