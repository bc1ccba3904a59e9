"""`phalanx plan`: the memory table of every shipped example, in text and JSON.

Covers: a table for each example (the reference trainer's model from spec.trainer, the
third-party scripts' from spec.memory.model), one row per allowed size with the per-GPU parts
and their sum; --gpu-memory deciding which rows fit and the smallest that does; the CLI saying
that without GPU memory there is no floor; a bad --gpu-memory named as such; the host memory of
memory snapshots per pod, and what the operator adds to each pod's memory request.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from phalanx.cli.main import app

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "deploy" / "examples").glob("*.yaml"))
cli = CliRunner()


def test_every_example_gets_a_table_of_its_sizes() -> None:
    done = cli.invoke(app, ["plan", *map(str, EXAMPLES)])
    assert done.exit_code == 0, done.output
    for example in EXAMPLES:
        assert f"{example}:" in done.output
    assert done.output.count("  nodes  ") == len(EXAMPLES), done.output
    assert "model unknown" not in done.output
    assert done.output.count("GPU memory unknown: no floor") == len(EXAMPLES)


def test_json_rows_add_up_and_the_gpu_memory_decides_what_fits() -> None:
    done = cli.invoke(app, ["plan", *map(str, EXAMPLES), "--gpu-memory", "1MiB", "-o", "json"])
    assert done.exit_code == 0, done.output
    plans = json.loads(done.output)
    assert [p["file"] for p in plans] == list(map(str, EXAMPLES))
    for plan in plans:
        assert plan["gpuMemory"] == 2**20
        assert plan["gpuMemorySource"] == "--gpu-memory"
        rows = plan["sizes"]
        assert rows, plan["file"]
        for row in rows:
            parts = row["weights"] + row["gradients"] + row["optimizer"] + row["activations"]
            assert row["total"] == parts
            assert row["fits"] == (row["total"] <= plan["usable"])
        fitting = [row["nodes"] for row in rows if row["fits"]]
        assert plan["smallestFitting"] == (min(fitting) if fitting else None)
    by_name = {p["job"]: p for p in plans}
    assert by_name["quickstart"]["smallestFitting"] is None, "DDP: 1.7 MiB a GPU at any size"
    assert by_name["python-script"]["smallestFitting"] == 2


def test_a_bad_gpu_memory_is_named() -> None:
    done = cli.invoke(app, ["plan", str(EXAMPLES[0]), "--gpu-memory", "80 gigs"])
    assert done.exit_code == 2
    assert "--gpu-memory" in done.output


def test_the_host_memory_of_memory_snapshots_is_in_the_plan() -> None:
    """A sharded job's pods hold bigger shards at fewer nodes (and a buddy's copy): the pod's
    request takes the most of any size; the quickstart's DDP pods hold two slots of its state."""
    done = cli.invoke(app, ["plan", *map(str, EXAMPLES), "-o", "json"])
    by_name = {p["job"]: p for p in json.loads(done.output)}
    for plan in by_name.values():
        rows = plan["sizes"]
        assert plan["podMemoryAdded"] == max(r["hostSnapshotsPerPod"] for r in rows)
    quickstart = by_name["quickstart"]["sizes"][0]
    assert quickstart["hostSnapshotsPerPod"] == 2 * (
        quickstart["weights"] + quickstart["optimizer"]
    )
    text = cli.invoke(app, ["plan", str(EXAMPLES[0])]).output
    assert "memory snapshots (spec.checkpoint.memoryIntervalSteps) hold up to" in text
