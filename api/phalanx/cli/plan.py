"""`phalanx plan JOB.yaml`: per-GPU memory at every size the job may run at, and which fit.

Why before submitting: with sharded training a shrunken job holds bigger shards on every GPU, so
"does it fit, and down to how many nodes?" decides min..max. The figures are the planner's own
(`phalanx.operator.planner.memory`), the same that set the operator's shrink floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from phalanx.models import TrainingJob
from phalanx.models.memory import quantity_bytes
from phalanx.operator.planner import memory

COLUMNS = ("weights", "gradients", "optimizer", "activations")


def gpu_memory_of(job: TrainingJob, flag: str | None) -> tuple[int | None, str | None]:
    """The GPU memory to plan for, in bytes, and where it came from: --gpu-memory, else
    spec.memory.gpuMemory; (None, None) when neither says."""
    if flag is not None:
        return quantity_bytes(flag), "--gpu-memory"
    if job.spec.memory is not None and job.spec.memory.gpu_memory is not None:
        return quantity_bytes(job.spec.memory.gpu_memory), "spec.memory.gpuMemory"
    return None, None


def plan_json(path: Path, job: TrainingJob, gpu_flag: str | None) -> dict[str, Any]:
    """The plan of one manifest as JSON (`-o json`)."""
    gpu_memory, source = gpu_memory_of(job, gpu_flag)
    rows = memory.table(job.spec, gpu_memory)
    model = memory.model_of(job.spec)
    return {
        "file": str(path),
        "job": job.metadata.name,
        "model": model.model_dump(mode="json", by_alias=True) if model else None,
        "gpuMemory": gpu_memory,
        "gpuMemorySource": source,
        "usable": memory.usable(gpu_memory) if gpu_memory is not None else None,
        "sizes": [
            {
                "nodes": row.nodes,
                "worldSize": row.nodes * job.spec.nproc_per_node,
                "dataParallel": row.data_parallel,
                **{part: getattr(row, part) for part in COLUMNS},
                "total": row.total,
                "fits": row.fits,
                "hostSnapshotsPerPod": row.host_snapshots,
            }
            for row in rows or []
        ],
        "smallestFitting": next((r.nodes for r in rows or [] if r.fits), None),
        "podMemoryAdded": memory.snapshot_request(job.spec),
    }


def print_plan(console: Console, path: Path, job: TrainingJob, gpu_flag: str | None) -> None:
    """The plan of one manifest as a table, with what it concludes."""
    plan = plan_json(path, job, gpu_flag)
    console.print(f"[bold]{path}[/]: {job.metadata.name}", highlight=False)
    if plan["model"] is None:
        console.print(
            "  model unknown: set spec.memory.model (parameters, layers, hidden, sequenceLength) "
            "for your own program, or spec.trainer for the reference trainer",
            highlight=False,
        )
        return
    model = plan["model"]
    console.print(
        f"  model: {model['parameters']:,} parameters, {model['layers']} layers x hidden "
        f"{model['hidden']}, {model['sequenceLength']} tokens x {model['microBatchSize']} a "
        f"micro-batch, {model['precision']}, {model['sharding']}"
        + (", activation checkpointing" if model["activationCheckpointing"] else ""),
        highlight=False,
    )
    table = Table("nodes", "world", "DP", *COLUMNS, "per GPU", "fits", "snapshots",
                  box=None, padding=(0, 2))  # fmt: skip
    for row in plan["sizes"]:
        fits = {True: "[green]yes[/]", False: "[red]no[/]", None: "-"}[row["fits"]]
        table.add_row(
            str(row["nodes"]), str(row["worldSize"]), str(row["dataParallel"]),
            *(size(row[part]) for part in COLUMNS), size(row["total"]), fits,
            size(row["hostSnapshotsPerPod"]),
        )  # fmt: skip
    console.print(table)
    if plan["podMemoryAdded"]:
        console.print(
            f"  memory snapshots (spec.checkpoint.memoryIntervalSteps) hold up to "
            f"{size(plan['podMemoryAdded'])} of host memory per pod: the operator adds it to "
            "each pod's memory request (and to its limit, where the template sets one)",
            highlight=False,
        )
    if plan["gpuMemory"] is None:
        console.print(
            "  GPU memory unknown: no floor here (pass --gpu-memory 80GiB; on a cluster the "
            "operator takes spec.memory.gpuMemory, else the nodes' GPU labels)",
            highlight=False,
        )
    elif plan["smallestFitting"] is None:
        console.print(
            f"  [red]fits at no size[/] in {size(plan['usable'])} usable of "
            f"{size(plan['gpuMemory'])} ({plan['gpuMemorySource']}): the operator fails it",
            highlight=False,
        )
    else:
        console.print(
            f"  smallest size that fits in {size(plan['usable'])} usable of "
            f"{size(plan['gpuMemory'])} ({plan['gpuMemorySource']}): "
            f"{plan['smallestFitting']} nodes",
            highlight=False,
        )


def size(count: int) -> str:
    """Bytes for people: KiB to GiB, three significant figures."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"
