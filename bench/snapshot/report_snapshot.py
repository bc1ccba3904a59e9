"""The report's memory-snapshot section: what a snapshot blocks and what a restore from memory
takes at real model sizes, beside a DCP save and load of the same state; the suite's run on this
machine's CPU, and the GPU runs kept in bench/results/gpu (made where a device was lent: the
suite cannot run them, so each names its device and date)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Figures = dict[str, Any]

GPU_RESULTS = Path(__file__).resolve().parents[1] / "results" / "gpu"


def _ms(value: float) -> str:
    return f"{value * 1000:.0f} ms"


def _rows(figures: list[Figures], where: str) -> list[str]:
    return [
        f"| {where} | {f['model']} ({f['parameters'] / 1e6:.1f} M) | {f['state_mib']:.0f} MiB "
        f"| {_ms(f['step_seconds'])} | {_ms(f['called'])} | {_ms(f['copied'])} "
        f"| {_ms(f['blocked_in_run'])} ({f['share_in_run'] * 100:.2f} %{_every(f)}) "
        f"| {_ms(f['restore'])} "
        f"| {_ms(f['dcp_save'])} | {_ms(f['dcp_load'])} "
        f"| {f['dcp_load'] / f['restore']:.1f}x |"
        for f in figures
    ]


def _every(figures: Figures) -> str:
    """The default cadence's spacing in the run, where the run recorded it (before the cadence
    had an overhead budget, every run snapshotted every 10 steps)."""
    spacing = figures.get("default_spacing")
    return f"; every {spacing} steps" if spacing is not None else ""


def _checkpoint_lines(runs: list[tuple[str, list[Figures]]]) -> list[str]:
    """A checkpoint at a snapshot's step, where a run measured it: what the job's async save
    blocks (until staged) staged by DCP's stager, and staged from the snapshot of its step."""
    measured = [
        f"{where}, {f['model']}: {_ms(f['checkpoint_staged'])} staged by DCP, "
        f"{_ms(f['checkpoint_from_snapshot'])} from the snapshot"
        for where, figures in runs
        for f in figures
        if "checkpoint_from_snapshot" in f
    ]
    if not measured:
        return []
    return [
        "A checkpoint at a snapshot's step (an async DCP save until its staging is done, when "
        "training may change the state; the snapshot's own cost is the row above): "
        + "; ".join(measured)
        + ".",
        "",
    ]


def gpu_runs() -> list[Figures]:
    """The GPU runs on record, each `{"machine", "figures", "date"?}`."""
    return [json.loads(p.read_text()) for p in sorted(GPU_RESULTS.glob("snapshot-*.json"))]


def section(suite: Figures | None) -> list[str]:
    runs = [(run["machine"], run["figures"]) for run in gpu_runs()]
    if suite is not None:
        runs.insert(0, (f"{suite['machine']} (this run)", suite["figures"]))
    if not runs:
        return []
    lines = [
        "## Memory snapshots at real sizes: blocked time and restore, beside DCP",
        "",
        "One rank; model + AdamW state (toy: the quickstart's model, its step with the job's "
        "0.1 s of emulated compute; large: 117.5 M parameters, real compute). Call: the `maybe_save` call (the state dict, its "
        "structure, the hand-off). Call + copy: until the copy into the pod's memory is done, the "
        "most the next optimizer step can wait. In a run: steps with a snapshot at the default "
        "cadence (every 10 steps, or every multiple of 10 that keeps call + copy within 1 % of "
        "step time, `memoryOverheadPercent`; runs that name no spacing took every 10) against "
        "the same steps without, back to back: what a snapshot really cost the "
        "loop (on a GPU the copy runs beside the next forward and backward passes), and its share "
        "of step time: a difference of two runs of a few dozen steps, so where steps vary by more "
        "than a snapshot costs (the CPU here) it is noise around the call + copy figure, even "
        "below zero; the target takes call + copy. Restore: a fresh model and optimizer loaded from the pod's memory; DCP: a save and "
        "a load of the same state in the same memory (tmpfs), the last column DCP load / restore. "
        "A fresh run maps its two slots with their pages made (on a GPU, pinned) once, within "
        "its first optimizer step, not counted here (bench/results give it as `prepared`, and "
        "the first snapshot after it as `first_copied`); a resumed run's are made by its first "
        "snapshots.",
        "",
        "| where | model | snapshot | step | call | call + copy | in a run | restore | DCP save "
        "| DCP load | DCP load / restore |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for where, figures in runs:
        lines += _rows(figures, where)
    lines += ["", *_checkpoint_lines(runs)]
    lines += [
        "On a GPU the copy is the whole state (12 bytes a parameter here) from the device into "
        "pinned host memory at PCIe speed (about 48 GB/s measured on the H100): it overlaps the "
        "next forward and backward passes, and what it does not cover blocks the optimizer "
        "step. A single GPU holding a whole 1.1 B-parameter state with a 110 ms step is the worst "
        "case; sharded over data-parallel ranks (FSDP, or DDP's pieces within a pod) each rank "
        "copies its share.",
        "",
    ]
    return lines


def peer_section(recovery: Figures | None) -> list[str]:
    """Recovery at 117.5 M parameters with state to load: a DDP worker killed (its pod's memory),
    an FSDP node lost with a hot spare (the lost rank's shard from its buddy's memory), and
    torchrun beside them, from the suite's recovery run (its scenarios that record where each
    new epoch loaded its state from)."""
    scenarios = {name: s for name, s in (recovery or {}).get("scenarios", {}).items()
                 if name.endswith("-large") and "sources" in s}  # fmt: skip
    if "node-large-fsdp" not in scenarios:
        return []
    lines = [
        "## Recovery with state to load: 117.5 M parameters, a peer's memory (local backend)",
        "",
        "2 nodes x 1 process, real compute (about 1.8 s a step here); each Phalanx fault strikes "
        "25 s and at least 12 steps after the epoch's first step, past its first memory "
        "snapshot; torchrun's worker is killed 25 s after its first step, before its first "
        "checkpoint (every 20 steps), so it starts afresh: not like for like in what it loads, "
        "beside for scale only. Resumed from: where the new epoch's ranks loaded the state "
        "(memory: its pod's; peer: sent by another pod's rank; storage: DCP). The 117.5 M rows "
        "of the recovery run above.",
        "",
        "| fault | failures | p50 | max | resumed from | p50 / DDP worker kill |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    worker = scenarios.get("worker-large", {}).get("p50")
    for s in scenarios.values():
        if not s["seconds"]:
            continue
        sources = ", ".join(f"{src or 'fresh start'} {s['sources'].count(src)}"
                            for src in dict.fromkeys(s.get("sources") or []))  # fmt: skip
        ratio = f"{s['p50'] / worker:.2f}x" if worker else "-"
        lines.append(f"| {s['what']} | {len(s['seconds'])} | {s['p50']:.2f} s "
                     f"| {max(s['seconds']):.2f} s | {sources or '-'} | {ratio} |")  # fmt: skip
    return [*lines, ""]
