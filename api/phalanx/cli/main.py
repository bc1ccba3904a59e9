"""`phalanx`: run a TrainingJob on this machine, check a manifest, or read the API's fields.

Exit codes (also in `phalanx --help`):
  0    the job succeeded (run), or every manifest is valid (validate)
  1    the job failed: restart budget exhausted, a configuration error, not enough capacity
  2    bad input: an invalid manifest (each refused field named), or a bad flag
  130  interrupted by Ctrl-C: the pods checkpointed and stopped; run again to resume
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import replace
from enum import StrEnum
from importlib.metadata import version
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from phalanx.cli import cluster
from phalanx.cli.display import RunDisplay, render_summary
from phalanx.cli.explain import UnknownFieldError, explain
from phalanx.cli.manifest import ManifestError, load_job
from phalanx.cli.plan import plan_json, print_plan
from phalanx.local import Fault, FaultPlan, LocalRun, RunOptions
from phalanx.local.faults import (
    Trigger,
    parse_capacity_schedule,
    parse_duration,
    parse_kill_rank,
    parse_trigger,
)
from phalanx.local.launch import Workdir, warnings
from phalanx.local.runner import LOCAL_PLANNER
from phalanx.models import TrainingJob
from phalanx.models.memory import quantity_bytes

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_KILL_RANK_AFTER = 20.0

app = typer.Typer(
    name="phalanx",
    help="Fault-tolerant distributed PyTorch training: run a TrainingJob locally, check it, "
    "explain its fields.",
    epilog="Exit codes: 0 succeeded/valid, 1 job failed, 2 invalid manifest or flag, "
    "130 interrupted (checkpointed; run again to resume).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    """`--version`: the package's version, the one the chart and the images carry."""
    if asked:
        typer.echo(f"phalanx {version('phalanx')}")
        raise typer.Exit()


@app.callback()
def _options(
    _version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True,
                     help="Print the version and exit."),
    ] = False,
) -> None:  # fmt: skip
    """Options before any command."""


class Output(StrEnum):
    text = "text"
    json = "json"


def _duration(value: str, flag: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=flag) from error


def _when(value: str, flag: str) -> Trigger:
    try:
        return parse_trigger(value)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint=flag) from error


def _fault_plan(
    kill_node_at: list[str],
    kill_rank: list[str],
    hang_node_at: list[str],
    slow_node_at: list[str],
    drain_node_at: list[str],
    slowdown: float,
    fault_node: int | None,
    capacity_schedule: list[str],
) -> FaultPlan:
    faults = [
        Fault("kill-node", node_rank=fault_node, **_when(w, "--kill-node-at")) for w in kill_node_at
    ] + [
        Fault("hang-node", node_rank=fault_node, **_when(w, "--hang-node-at")) for w in hang_node_at
    ] + [
        Fault("slow-node", node_rank=fault_node, slowdown=slowdown, **_when(w, "--slow-node-at"))
        for w in slow_node_at
    ] + [
        Fault("drain-node", node_rank=fault_node, **_when(w, "--drain-node-at"))
        for w in drain_node_at
    ]  # fmt: skip
    if any(f.kind == "slow-node" and f.phase is not None for f in faults):
        raise typer.BadParameter(
            "a slow node lasts: WHEN is a time, step:N or checkpoint, not a start-up phase",
            param_hint="--slow-node-at",
        )
    try:
        faults += [parse_kill_rank(r, DEFAULT_KILL_RANK_AFTER) for r in kill_rank]
        changes = [c for text in capacity_schedule for c in parse_capacity_schedule(text)]
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error
    return FaultPlan(faults=faults, capacity=changes)


def _error(console: Console, error: ManifestError) -> None:
    console.print(Text.assemble(("error: ", "bold red"), str(error)), soft_wrap=True)


def _load(path: Path, console: Console) -> TrainingJob:
    try:
        return load_job(path)
    except ManifestError as error:
        _error(console, error)
        raise typer.Exit(EXIT_INVALID) from error


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="A TrainingJob manifest (YAML).")],
    output: Annotated[
        Output, typer.Option("--output", "-o", help="json: the summary as the last line of stdout.")
    ] = Output.text,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Checkpoints, logs and heartbeat. [default: .phalanx/runs/<job>]"),
    ] = None,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Delete the run directory first instead of resuming.")
    ] = False,
    capacity: Annotated[
        int | None,
        typer.Option(
            min=1, help="Nodes the local cluster holds. [default: desired size + spec.spares]"
        ),
    ] = None,
    capacity_schedule: Annotated[
        list[str],
        typer.Option(help="Capacity over time or progress, e.g. 30s=4,step:90=2 (grow or shrink)."),
    ] = [],  # noqa: B006 - typer reads the default; it is never mutated
    kill_node_at: Annotated[
        list[str],
        typer.Option(
            "--kill-node-at",
            "--kill-node-after",
            metavar="WHEN",
            help="SIGKILL a node (agent and workers; the machine is lost) at WHEN: a time after "
            "the start (20s), step:N (once training reached step N), checkpoint (once one is "
            "committed), or a start-up phase (rendezvous, loading, first-step).",
        ),
    ] = [],  # noqa: B006 - typer reads the default; it is never mutated
    kill_rank: Annotated[
        list[str],
        typer.Option(help="SIGKILL one worker: RANK or RANK@WHEN (default 20s; WHEN as above)."),
    ] = [],  # noqa: B006
    hang_node_at: Annotated[
        list[str],
        typer.Option(
            "--hang-node-at",
            "--hang-node-after",
            metavar="WHEN",
            help="SIGSTOP a node (a hang) at WHEN (as for --kill-node-at).",
        ),
    ] = [],  # noqa: B006
    slow_node_at: Annotated[
        list[str],
        typer.Option(
            "--slow-node-at",
            metavar="WHEN",
            help="Throttle a node's CPU from WHEN on (as for --kill-node-at): its processes run "
            "1/--slowdown of the time, a straggler.",
        ),
    ] = [],  # noqa: B006
    drain_node_at: Annotated[
        list[str],
        typer.Option(
            "--drain-node-at",
            metavar="WHEN",
            help="Cordon a node for maintenance at WHEN (as for --kill-node-at): the job saves "
            "and moves its rank off (a spare, or a shrink), then the machine leaves.",
        ),
    ] = [],  # noqa: B006
    slowdown: Annotated[
        float, typer.Option(min=1.5, help="How many times slower --slow-node-at makes a node.")
    ] = 4.0,
    fault_node: Annotated[
        int | None,
        typer.Option(min=0, help="Node rank that node faults hit. [default: the last]"),
    ] = None,
    grace_period: Annotated[
        str, typer.Option(help="SIGTERM -> SIGKILL delay when a pod is stopped.")
    ] = "5s",
    grow_cooldown: Annotated[
        str, typer.Option(help="Least run time of an epoch before the job grows again.")
    ] = "10s",
) -> None:
    """Run a TrainingJob on this machine, with the operator's failure handling.

    Its nodes are local processes on loopback, driven by the operator's planner: restarts,
    shrink and grow back, resume from the newest valid checkpoint.
    """
    as_json = output is Output.json
    console = Console(stderr=as_json, highlight=False)
    job = _load(file, console)
    faults = _fault_plan(
        kill_node_at, kill_rank, hang_node_at, slow_node_at, drain_node_at, slowdown, fault_node,
        capacity_schedule,
    )  # fmt: skip
    options = RunOptions(
        workdir=workdir or Path(".phalanx", "runs", job.metadata.name or "job"),
        capacity=capacity,
        faults=faults,
        grace_seconds=_duration(grace_period, "--grace-period"),
        planner=replace(
            LOCAL_PLANNER, grow_cooldown_seconds=_duration(grow_cooldown, "--grow-cooldown")
        ),
        fresh=fresh,
    )
    for note in warnings(job):
        console.print(f"[dim]note: {note}[/]", soft_wrap=True)
    resumable = None if fresh else Workdir(options.workdir).newest_checkpoint()
    if resumable:
        console.print(f"resuming from the checkpoint of step {resumable[0]} in {resumable[1]}")
    steps = job.spec.trainer.steps if job.spec.trainer else None
    with RunDisplay(console, steps) as display:
        local = LocalRun(job, options, on_event=display.event)

        def stop(*_: object) -> None:
            local.request_stop()
            if local.stop_requests == 1:
                console.print("stopping: pods checkpoint, then stop (Ctrl-C again to kill now)")

        previous = signal.signal(signal.SIGINT, stop), signal.signal(signal.SIGTERM, stop)
        try:
            summary = local.run(on_tick=display.update)
        finally:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
    render_summary(console, summary)
    if as_json:
        sys.stdout.write(summary.model_dump_json(by_alias=True, exclude_none=True) + "\n")
        sys.stdout.flush()
    if local.stop_requests:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_OK if summary.phase == "Succeeded" else EXIT_FAILED)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="TrainingJob manifests (YAML).")],
) -> None:
    """Check manifests with the same rules and messages as the API server."""
    console = Console(highlight=False)
    invalid = 0
    for path in files:
        try:
            job = load_job(path)
        except ManifestError as error:
            invalid += 1
            _error(console, error)
            continue
        spec = job.spec
        console.print(
            f"{path}: valid TrainingJob {job.metadata.name!r} "
            f"({spec.replicas.min}..{spec.replicas.max} nodes x {spec.nproc_per_node} processes)"
        )
    raise typer.Exit(EXIT_INVALID if invalid else EXIT_OK)


@app.command(name="plan")
def plan_command(
    files: Annotated[list[Path], typer.Argument(help="TrainingJob manifests (YAML).")],
    gpu_memory: Annotated[
        str | None,
        typer.Option(help="Memory of one GPU, e.g. 80GiB. [default: spec.memory.gpuMemory]"),
    ] = None,
    output: Annotated[
        Output, typer.Option("--output", "-o", help="json: one JSON list of the plans.")
    ] = Output.text,
) -> None:
    """Per-GPU memory (weights, gradients, optimizer state, activations) at every size in
    min..max, which sizes fit, and the smallest that does: how far the job may shrink."""
    console = Console(highlight=False, soft_wrap=True)
    console.width = max(console.width, 112)  # the table's, where stdout is narrow or a pipe
    if gpu_memory is not None:
        try:
            quantity_bytes(gpu_memory)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--gpu-memory") from error
    jobs = [(path, _load(path, console)) for path in files]
    if output is Output.json:
        sys.stdout.write(json.dumps([plan_json(p, job, gpu_memory) for p, job in jobs]) + "\n")
        return
    for path, job in jobs:
        print_plan(console, path, job, gpu_memory)


@app.command(name="explain")
def explain_command(
    field: Annotated[
        str, typer.Argument(help="A dotted field path, e.g. spec.replicas or spec.failurePolicy.")
    ] = "",
) -> None:
    """Describe a TrainingJob field: type, default, rules and sub-fields (like kubectl explain)."""
    try:
        text = explain(field)
    except UnknownFieldError as error:
        Console(stderr=True).print(f"error: {error}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from error
    sys.stdout.write(text)


@app.command()
def openapi() -> None:
    """Print the REST API's OpenAPI document (the same as the service's /openapi.json)."""
    from phalanx.server.app import create_app
    from phalanx.server.settings import ServerSettings

    document = create_app(ServerSettings()).openapi()
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")


cluster.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
