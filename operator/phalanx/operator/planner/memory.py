"""Per-GPU memory of a job at each size, and the smallest size that fits: the shrink floor.

Why the planner needs it: with sharded training a smaller data-parallel degree puts bigger shards
on every GPU, so shrinking a job that fits at 8 nodes to 5 can run it out of memory, and then it
fails in a loop. The elastic policy (`elastic.is_valid_size`) takes only sizes that fit.

The accounting, per GPU (Rajbhandari et al., ZeRO; Korthikanti et al., activation recomputation):
- Model states, Φ parameters: weights, gradients and Adam's optimizer state at 4 + 4 + 8 bytes a
  parameter in fp32, or 2 + 2 + 12 in mixed precision (16-bit weights and gradients; fp32 master
  weights and two moments). Tensor and pipeline parallelism divide all three by t x p; data
  parallelism over d ranks divides the optimizer state (ZeRO-1), also gradients (ZeRO-2, FSDP
  shard-grad-op), also weights (ZeRO-3, FSDP full shard), and HSDP the three but only over the
  ranks of one pod.
- Activations of one micro-batch of b samples, s tokens, hidden size h, in 16-bit: 34 s b h / t
  bytes a layer (attention scores not kept: fused attention), twice that in fp32. A pipeline
  stage holds L / p layers, and 1F1B keeps up to p micro-batches in flight on the first stage:
  L layers' worth. Recomputation keeps only each layer's input (2 s b h) and one layer's
  activations while it recomputes.
Temporary buffers (FSDP's gathered layer, DDP's gradient buckets, the allocator's slack) are not
counted: the `headroom` fraction of the GPU is left for them.

The reference trainer keeps fp32 weights and gradients whatever its mixed_precision (autocast and
FSDP2's MixedPrecisionPolicy cast copies for compute), so it is costed as fp32.

Host memory for memory snapshots (`phalanx.resume.memory`), per pod: each holds two slots of a
rank's weights and optimizer state (not its gradients). A replicated (DDP) state is held once
per pod for each part of the model its ranks hold (its ranks write a piece each); a sharded
state once per rank, and again for the buddy in the previous pod whose shard it keeps (two pods
or more). It lives in the pod's /dev/shm, which counts against the pod's memory: the operator
adds the most it can reach at any allowed size (a smaller job holds bigger shards) to the pod's
memory request, and to its limit where the template sets one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from phalanx.models.job import TrainingJob
from phalanx.models.memory import (
    SHARED_MEMORY,
    MemoryPrecision,
    MemorySettings,
    MemorySharding,
    ModelDescription,
    quantity_bytes,
)
from phalanx.models.spec import TrainingJobSpec
from phalanx.operator.planner.observed import NodeView

BYTES_PER_PARAMETER: dict[MemoryPrecision, tuple[int, int, int]] = {
    "fp32": (4, 4, 8),
    "mixed": (2, 2, 12),
}
"""Weights, gradients, optimizer state (Adam), in bytes a parameter."""

ACTIVATION_BYTES_PER_LAYER = 34
"""Bytes of activations a layer keeps per token and hidden unit in 16-bit (Korthikanti et al.)."""

HEADROOM = 0.1
"""Share of a GPU's memory kept free for what is not estimated (buffers, fragmentation)."""

REFERENCE_SHARDING: dict[str, MemorySharding] = {
    "ddp": "ddp",
    "fsdp-grad-op": "zero2",
    "fsdp": "zero3",
    "hsdp": "hsdp",
}
"""The reference trainer's strategies in the estimate's terms."""


@dataclass(frozen=True)
class ReferenceModel:
    """The reference trainer's TinyLM at its defaults (phalanx.trainer.config; a test checks that
    these agree with it)."""

    vocab: int = 64
    seq_len: int = 16
    dim: int = 64
    layers: int = 2
    hidden: int = 128
    micro_batch_size: int = 4

    @property
    def parameters(self) -> int:
        """Embeddings (tokens, positions), per block two RMSNorms, attention (4 D²) and the
        feed-forward (2 D H), the final norm and the output head."""
        block = 2 * self.dim + 4 * self.dim**2 + 2 * self.dim * self.hidden
        embeddings = (self.vocab + self.seq_len) * self.dim
        return embeddings + self.layers * block + self.dim + self.dim * self.vocab


REFERENCE = ReferenceModel()


@dataclass(frozen=True)
class Estimate:
    """Per-GPU bytes at one size, by part, and whether that fits the GPU (None: memory unknown)."""

    nodes: int
    data_parallel: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    fits: bool | None = None
    host_snapshots: int = 0
    """Host memory of one pod for memory snapshots (not GPU memory: not in `total`)."""

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations


def model_of(spec: TrainingJobSpec) -> ModelDescription | None:
    """The model the job trains: spec.memory.model, else the reference trainer's when the job
    sets spec.trainer; None when unknown."""
    if spec.memory is not None and spec.memory.model is not None:
        return spec.memory.model
    if spec.trainer is None:
        return None
    return ModelDescription(
        parameters=REFERENCE.parameters,
        layers=REFERENCE.layers,
        hidden=REFERENCE.dim,
        sequence_length=REFERENCE.seq_len,
        micro_batch_size=REFERENCE.micro_batch_size,
        precision="fp32",
        sharding=reference_sharding(spec),
        activation_checkpointing=spec.trainer.activation_checkpointing,
    )


def reference_sharding(spec: TrainingJobSpec) -> MemorySharding:
    """With tensor or pipeline parallelism the reference trainer runs FSDP2 over the data-parallel
    ranks (full shard unless fsdp-grad-op), except DDP stages of a pipeline without TP."""
    assert spec.trainer is not None
    sharding = spec.trainer.sharding
    tensor, pipeline = spec.parallelism.tensor, spec.parallelism.pipeline
    if tensor > 1 or (pipeline > 1 and sharding == "hsdp"):
        return "zero2" if sharding == "fsdp-grad-op" else "zero3"
    return REFERENCE_SHARDING[sharding]


def estimate(spec: TrainingJobSpec, model: ModelDescription, nodes: int) -> Estimate:
    """Per-GPU memory of `model` trained as `spec` says on `nodes` node pods."""
    tensor, pipeline = spec.parallelism.tensor, spec.parallelism.pipeline
    data_parallel = nodes * spec.nproc_per_node // (tensor * pipeline)
    shard = _shard_degree(model.sharding, data_parallel, spec.nproc_per_node // (tensor * pipeline))
    per_rank = model.parameters / (tensor * pipeline)
    weight_bytes, gradient_bytes, optimizer_bytes = BYTES_PER_PARAMETER[model.precision]
    sharded = {
        "ddp": (1, 1, 1),
        "zero1": (1, 1, shard),
        "zero2": (1, shard, shard),
        "zero3": (shard, shard, shard),
        "hsdp": (shard, shard, shard),
    }[model.sharding]
    weights = round(per_rank * weight_bytes / sharded[0])
    optimizer = round(per_rank * optimizer_bytes / sharded[2])
    # FSDP2 keeps a shard at rest also when it holds whole weights through the step (ZeRO-2):
    at_rest = (
        weights if model.sharding in ("ddp", "zero1") else round(per_rank * weight_bytes / shard)
    )
    return Estimate(
        nodes=nodes,
        data_parallel=data_parallel,
        weights=weights,
        gradients=round(per_rank * gradient_bytes / sharded[1]),
        optimizer=optimizer,
        activations=activation_bytes(model, tensor),
        host_snapshots=snapshot_bytes(spec, model.sharding, nodes, at_rest + optimizer),
    )


SNAPSHOT_SLOTS = 2
"""Snapshots a rank keeps of its state: the newest whole one survives a kill during the next."""


def snapshot_bytes(spec: TrainingJobSpec, sharding: MemorySharding, nodes: int, state: int) -> int:
    """Host memory of one pod for memory snapshots, each rank's snapshotted state being `state`
    bytes (see the module's docstring); 0 when spec.checkpoint.memoryIntervalSteps is 0."""
    if spec.checkpoint.memory_interval_steps == 0:
        return 0
    if sharding == "ddp":
        parts = min(spec.nproc_per_node, spec.model_parallel_size)
        return SNAPSHOT_SLOTS * state * parts
    copies = SNAPSHOT_SLOTS * (2 if nodes > 1 else 1)
    return copies * state * spec.nproc_per_node


def snapshot_request(spec: TrainingJobSpec) -> int:
    """The most host memory a pod holds for snapshots at any size the job may run at (pods
    outlive a resize); 0 when the model is unknown or snapshots are off."""
    model = model_of(spec)
    if model is None:
        return 0
    return max((estimate(spec, model, n).host_snapshots for n in sizes(spec)), default=0)


def _shard_degree(sharding: MemorySharding, data_parallel: int, per_pod: int) -> int:
    """Ranks the sharded states are divided over: every data-parallel rank, or for HSDP the
    data-parallel ranks of one pod."""
    return max(1, min(per_pod, data_parallel)) if sharding == "hsdp" else data_parallel


def activation_bytes(model: ModelDescription, tensor: int) -> int:
    """Activations the first pipeline stage holds at its peak (see the module's docstring)."""
    scale = 2 if model.precision == "fp32" else 1
    tokens = model.sequence_length * model.micro_batch_size * model.hidden
    full_layer = ACTIVATION_BYTES_PER_LAYER * tokens * scale / tensor
    if model.activation_checkpointing:
        return round(model.layers * 2 * tokens * scale + full_layer)
    return round(model.layers * full_layer)


def usable(gpu_memory: int, headroom: float = HEADROOM) -> int:
    """Bytes of a GPU the estimate may fill."""
    return int(gpu_memory * (1 - headroom))


def sizes(spec: TrainingJobSpec) -> list[int]:
    """Node counts in min..max that keep the data-parallel degree an integer."""
    return [
        n
        for n in range(spec.replicas.min, spec.replicas.max + 1)
        if n * spec.nproc_per_node % spec.model_parallel_size == 0
    ]


def table(spec: TrainingJobSpec, gpu_memory: int | None) -> list[Estimate] | None:
    """The estimate at every allowed size, with whether it fits `gpu_memory`; None when the
    job's model is unknown."""
    model = model_of(spec)
    if model is None:
        return None
    rows = [estimate(spec, model, n) for n in sizes(spec)]
    if gpu_memory is None:
        return rows
    return [replace(row, fits=row.total <= usable(gpu_memory)) for row in rows]


def fits(spec: TrainingJobSpec, nodes: int) -> bool:
    """Whether the job fits in GPU memory on `nodes` node pods; True when that cannot be told
    (no GPU memory or no model in the spec): no floor then."""
    gpu_memory = spec.memory.gpu_memory_bytes if spec.memory is not None else None
    model = model_of(spec) if gpu_memory is not None else None
    if gpu_memory is None or model is None:
        return True
    return estimate(spec, model, nodes).total <= usable(gpu_memory)


def why_not(spec: TrainingJobSpec) -> str:
    """What a job that fits at no size needs, at its largest size, against what a GPU has."""
    gpu_memory = spec.memory.gpu_memory if spec.memory is not None else None
    model = model_of(spec)
    if gpu_memory is None or model is None:
        return "no floor: the GPU memory or the model is not known"
    largest = max(sizes(spec))
    needed = estimate(spec, model, largest).total
    size = quantity_bytes(gpu_memory)
    return (
        f"the job does not fit in GPU memory at any size: at {largest} nodes (replicas.max) "
        f"each GPU needs {gib(needed)}, and {gib(usable(size))} of its {gib(size)} "
        f"(spec.memory.gpuMemory {gpu_memory}) may be used ({HEADROOM:.0%} kept free); "
        "`phalanx plan` shows each part"
    )


def snapshots_do_not_fit(spec: TrainingJobSpec) -> str | None:
    """Why the pods cannot hold their memory snapshots, naming the fields; None when they can.
    The operator mounts a Memory emptyDir without a size limit at /dev/shm (it counts against
    the pod's memory, to which the operator adds the snapshots); a template that mounts its own
    volume there with an emptyDir `sizeLimit` below what the snapshots hold would have its pods
    evicted at the first snapshots, so the job fails at once instead."""
    needed = snapshot_request(spec)
    template = spec.template.model_dump(mode="json", by_alias=True, exclude_none=True)["spec"]
    mounts = template["containers"][0].get("volumeMounts") or []
    name = next((m["name"] for m in mounts if m.get("mountPath") == SHARED_MEMORY), None)
    volumes = template.get("volumes") or []
    found = next(((i, v) for i, v in enumerate(volumes) if v.get("name") == name), None)
    if not needed or found is None or "sizeLimit" not in (found[1].get("emptyDir") or {}):
        return None
    index, volume = found
    limit = str(volume["emptyDir"]["sizeLimit"])
    try:
        if quantity_bytes(limit) >= needed:
            return None
    except ValueError:
        return None
    return (
        f"memory snapshots (spec.checkpoint.memoryIntervalSteps "
        f"{spec.checkpoint.memory_interval_steps}) hold up to {gib(needed)} per pod in "
        f"{SHARED_MEMORY}, and spec.template.spec.volumes[{index}].emptyDir.sizeLimit is "
        f"{limit}: raise the limit, remove the volume (the operator then mounts one without a "
        "limit), or set spec.checkpoint.memoryIntervalSteps: 0; `phalanx plan` shows the figure"
    )


GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
"""A node's GPU memory in MiB, as NVIDIA's GPU Feature Discovery labels it."""

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""A node's GPU model (NVIDIA-H100-80GB-HBM3): its GB count, where it names one, is the fallback."""


def node_gpu_memory(labels: Mapping[str, str]) -> int | None:
    """Bytes of one GPU of a node, from its GPU labels; None when they do not say."""
    mib = labels.get(GPU_MEMORY_LABEL, "")
    if mib.isdigit():
        return int(mib) * 2**20
    named = re.search(r"(\d+)GB", labels.get(GPU_PRODUCT_LABEL, ""))
    return int(named[1]) * 10**9 if named else None  # GB as marketed: the lower reading


def with_node_gpu_memory(job: TrainingJob, nodes: Iterable[NodeView]) -> TrainingJob:
    """`job`, with the GPU memory of its nodes when its spec gives none and its model is known:
    the least among the nodes its template's nodeSelector admits that have GPU labels (the job
    may land on any of them). A job that would fit at no size on that least GPU keeps no floor
    rather than failing: it may be meant for larger GPUs that its nodeSelector does not name,
    and only a gpuMemory the user gave is reason enough to refuse it."""
    spec = job.spec
    if (spec.memory is not None and spec.memory.gpu_memory) or model_of(spec) is None:
        return job
    selector = (spec.template.spec.model_extra or {}).get("nodeSelector") or {}
    found = [
        node.gpu_memory
        for node in nodes
        if node.gpu_memory is not None
        and (not selector or selector.items() <= dict(node.labels).items())
    ]
    if not found:
        return job
    memory = (spec.memory or MemorySettings()).model_copy(update={"gpu_memory": str(min(found))})
    sized = job.model_copy(update={"spec": spec.model_copy(update={"memory": memory})})
    return sized if floor(sized.spec) is not None else job


def gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def floor(spec: TrainingJobSpec) -> int | None:
    """The smallest allowed size that fits in GPU memory: None when none does. Memory per GPU
    only falls as the job grows, so every larger size fits too."""
    return next((n for n in sizes(spec) if fits(spec, n)), None)
