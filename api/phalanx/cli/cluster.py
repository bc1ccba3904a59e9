"""The cluster verbs: `phalanx submit | list | get | scale | suspend | resume | delete | logs |
watch`, against the REST API (`--server`, `--token`), with the caller's own RBAC rights.

Connection settings come from flags or PHALANX_SERVER, PHALANX_TOKEN and PHALANX_NAMESPACE.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import httpx
import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from phalanx.cli.display import PHASE_STYLES
from phalanx.sdk import Client, PhalanxAPIError
from phalanx.sdk.errors import raise_for
from phalanx.server.schemas import JobDetail

T = TypeVar("T")
EXIT_API_ERROR = 1

Server = Annotated[
    str, typer.Option("--server", envvar="PHALANX_SERVER", help="Base URL of the Phalanx API.")
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="PHALANX_TOKEN", help="Bearer token (e.g. kubectl create token)."
    ),
]
Namespace = Annotated[
    str, typer.Option("--namespace", "-n", envvar="PHALANX_NAMESPACE", help="Namespace.")
]
Name = Annotated[str, typer.Argument(help="The job's name.")]


@contextmanager
def client(server: str, token: str | None, namespace: str) -> Iterator[Client]:
    """An SDK client; API errors end the command with exit 1 and the API's words."""
    try:
        with Client(server, token=token, namespace=namespace) as sdk:
            yield sdk
    except PhalanxAPIError as error:
        Console(stderr=True).print(f"error: {error}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_API_ERROR) from error
    except httpx.TransportError as error:
        Console(stderr=True).print(f"error: cannot reach {server}: {error}", markup=False)
        raise typer.Exit(EXIT_API_ERROR) from error


def _print_job(job: JobDetail, output: str) -> None:
    if output == "json":
        sys.stdout.write(job.model_dump_json(by_alias=True, exclude_none=True) + "\n")
        return
    status = job.status
    phase = (status.phase if status else None) or "-"
    console = Console(highlight=False)
    console.print(
        Text.assemble(f"{job.namespace}/{job.name}  ", (phase, PHASE_STYLES.get(phase, "")))
    )
    if status:
        step = status.progress.step if status.progress else 0
        console.print(
            f"epoch {status.epoch}  nodes {status.nodes}  world {status.world_size}  "
            f"step {step}  restarts {status.restarts.total}  goodput {status.goodput}"
        )


def register(app: typer.Typer) -> None:
    """Add the cluster verbs to the `phalanx` app."""

    @app.command(rich_help_panel="Cluster")
    def submit(
        file: Annotated[Path, typer.Argument(help="A TrainingJob manifest (YAML).")],
        server: Server, token: Token = None, namespace: Namespace = "default",
        output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
    ) -> None:  # fmt: skip
        """Create a job on the cluster from a manifest."""
        with client(server, token, namespace) as sdk:
            _print_job(sdk.create(file), output)

    @app.command(name="list", rich_help_panel="Cluster")
    def list_(
        server: Server, token: Token = None, namespace: Namespace = "default",
        all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
        phase: Annotated[str | None, typer.Option(help="Only this phase.")] = None,
        selector: Annotated[str | None, typer.Option("--selector", "-l")] = None,
        output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
    ) -> None:  # fmt: skip
        """List jobs (all pages)."""
        with client(server, token, namespace) as sdk:
            pages = sdk.list(all_namespaces=all_namespaces, phase=phase, label_selector=selector)
            jobs = [job for page in pages for job in page.items]
        if output == "json":
            sys.stdout.write(
                json.dumps([j.model_dump(mode="json", by_alias=True) for j in jobs]) + "\n"
            )
            return
        table = Table("NAMESPACE", "NAME", "PHASE", "NODES", "WORLD", "EPOCH", "STEP", "RESTARTS",
                      box=None, header_style="bold")  # fmt: skip
        for j in jobs:
            table.add_row(j.namespace, j.name, j.phase or "-", str(j.nodes), str(j.world_size),
                          str(j.epoch), str(j.step or 0), str(j.restarts))  # fmt: skip
        Console().print(table)

    def one(action: Callable[[Client, str], JobDetail | None], help_text: str, name: str) -> None:
        def command(
            job: Name, server: Server, token: Token = None, namespace: Namespace = "default",
            output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
        ) -> None:  # fmt: skip
            with client(server, token, namespace) as sdk:
                result = action(sdk, job)
                if result is not None:
                    _print_job(result, output)

        command.__doc__ = help_text
        app.command(name=name, rich_help_panel="Cluster")(command)

    one(lambda sdk, job: sdk.get(job), "Show a job's status.", "get")
    one(lambda sdk, job: sdk.suspend(job), "Suspend a job (pods checkpoint and stop).", "suspend")
    one(lambda sdk, job: sdk.resume(job), "Resume a suspended job from its checkpoint.", "resume")
    one(lambda sdk, job: sdk.delete(job), "Delete a job and its pods.", "delete")

    @app.command(rich_help_panel="Cluster")
    def scale(
        job: Name, nodes: Annotated[int, typer.Argument(help="Desired node pods.")],
        server: Server, token: Token = None, namespace: Namespace = "default",
    ) -> None:  # fmt: skip
        """Set a job's desired node count (within replicas.min..max)."""
        with client(server, token, namespace) as sdk:
            _print_job(sdk.scale(job, nodes), "text")

    @app.command(rich_help_panel="Cluster")
    def logs(
        job: Name, server: Server, token: Token = None, namespace: Namespace = "default",
        node: Annotated[int, typer.Option(help="Node rank.")] = 0,
        follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
        tail: Annotated[int | None, typer.Option(help="Last lines only.")] = None,
    ) -> None:  # fmt: skip
        """Print a node's log (current epoch)."""
        with client(server, token, namespace) as sdk:
            for line in sdk.logs(job, node=node, follow=follow, tail_lines=tail):
                sys.stdout.write(line + "\n")

    @app.command(rich_help_panel="Cluster")
    def watch(
        job: Name, server: Server, token: Token = None, namespace: Namespace = "default",
    ) -> None:  # fmt: skip
        """Follow a job's progress live until it ends."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        url = f"{server.rstrip('/')}/api/v1/namespaces/{namespace}/jobs/{job}/progress"
        console = Console(highlight=False)
        with (
            client(server, token, namespace),
            Live(console=console) as live,
            httpx.stream("GET", url, headers=headers, timeout=None) as response,
        ):
            if not response.is_success:
                response.read()
                raise_for(response)
            for line in response.iter_lines():
                if line.startswith("data: "):
                    live.update(_watch_line(json.loads(line.removeprefix("data: "))))


def _watch_line(summary: dict[str, object]) -> Text:
    phase = str(summary.get("phase") or "-")
    return Text.assemble(
        (f"{summary['name']}  ", "bold"), (phase, PHASE_STYLES.get(phase, "")),
        f"  epoch {summary['epoch']}  nodes {summary['nodes']}  world {summary['worldSize']}  "
        f"step {summary.get('step') or 0}  restarts {summary['restarts']}",
    )  # fmt: skip
