"""The cluster verbs: `phalanx submit | list | get | describe | events | scale | suspend |
resume | delete | logs | watch`, with the caller's own RBAC rights, one of two ways:

- through the Phalanx API service: `--server` and `--token` (or PHALANX_SERVER, PHALANX_TOKEN),
  with the SDK;
- straight to the kube API with a kubeconfig, when no server is given: `--kubeconfig`, else
  $KUBECONFIG, else ~/.kube/config, and `--context`. No service need run (nor FastAPI be
  installed); the verbs run job control's core (`phalanx.control`), which the service runs too,
  with the user's credentials (`phalanx.cli.kubedirect`), so the output and the errors are the
  same either way.

The namespace: `-n`, else PHALANX_NAMESPACE, else the kubeconfig context's, else "default". API
errors end a verb with exit 1 in the API's words; conflicting or missing connection flags, exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import httpx
import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from phalanx.cli.display import PHASE_STYLES
from phalanx.cli.output import Format
from phalanx.cli.output import describe as describe_job
from phalanx.cli.output import events as output_events
from phalanx.cli.output import job as print_job
from phalanx.cli.output import jobs as print_jobs
from phalanx.models.responses import EventList, JobDetail, JobList, JobSummary
from phalanx.sdk import Client, PhalanxAPIError
from phalanx.sdk.calls import Manifest
from phalanx.sdk.errors import raise_for

if TYPE_CHECKING:
    from phalanx.cli.kubedirect import DirectClient

EXIT_API_ERROR, EXIT_BAD_FLAGS, EXIT_INTERRUPTED = 1, 2, 130
DEFAULT_KUBECONFIG = Path("~/.kube/config")

Server = Annotated[
    str | None,
    typer.Option(
        "--server", envvar="PHALANX_SERVER", help="Base URL of the Phalanx API service.",
        show_default=False,
    ),
]  # fmt: skip
Token = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="PHALANX_TOKEN",
        help="Bearer token for --server (e.g. kubectl create token).",
    ),
]  # fmt: skip
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig", exists=True, dir_okay=False, show_default=False,
        help="Talk to the kube API with this kubeconfig, not to an API service "
        "(without --server: default $KUBECONFIG, else ~/.kube/config).",
    ),
]  # fmt: skip
KubeContext = Annotated[
    str | None,
    typer.Option(
        "--context", show_default=False,
        help="Kubeconfig context (default: its current context).",
    ),
]  # fmt: skip
Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", envvar="PHALANX_NAMESPACE", show_default=False,
        help="Namespace (default: the kubeconfig context's, else default).",
    ),
]  # fmt: skip
Name = Annotated[str, typer.Argument(help="The job's name.")]
Output = Annotated[
    Format,
    typer.Option("--output", "-o", help="text, wide, name, json or yaml (as kubectl's -o)."),
]


class Jobs(Protocol):
    """What the verbs need: the SDK client's methods, and a job's progress."""

    def create(self, manifest: Manifest) -> JobDetail: ...
    def get(self, name: str) -> JobDetail: ...
    def list(
        self, *, all_namespaces: bool = ..., phase: str | None = ...,
        label_selector: str | None = ..., limit: int = ...,
    ) -> Iterator[JobList]: ...  # fmt: skip
    def scale(self, name: str, nodes: int) -> JobDetail: ...
    def suspend(self, name: str) -> JobDetail: ...
    def resume(self, name: str) -> JobDetail: ...
    def delete(self, name: str) -> None: ...
    def events(self, name: str) -> EventList: ...
    def logs(
        self, name: str, node: int = ..., follow: bool = ..., tail_lines: int | None = ...
    ) -> Iterator[str]: ...
    def progress(self, name: str) -> Iterator[JobSummary | None]:
        """The job's summary now and at each change, until it ends; None if it is deleted."""
        ...


class FlagsError(Exception):
    """The connection flags conflict, or name no way to reach a cluster (exit 2)."""


class RestClient(Client):
    """The SDK client, plus the service's progress stream (server-sent events)."""

    def progress(self, name: str) -> Iterator[JobSummary | None]:
        """The job's summary at each change until it ends, from the service's event stream."""
        path = f"/api/v1/namespaces/{self.namespace}/jobs/{name}/progress"
        with self._http.stream("GET", path, timeout=None) as response:
            if not response.is_success:
                response.read()
                raise_for(response)
            event = "message"
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    if event == "deleted":
                        yield None
                        return
                    yield JobSummary.model_validate_json(line.removeprefix("data: "))


def _kubeconfig_path(kubeconfig: Path | None) -> str:
    """--kubeconfig, else $KUBECONFIG (a list of files, as kubectl reads it), else
    ~/.kube/config if it exists; FlagsError saying how to connect when there is none."""
    if kubeconfig is not None:
        return str(kubeconfig)
    if from_env := os.environ.get("KUBECONFIG"):
        return from_env
    if DEFAULT_KUBECONFIG.expanduser().is_file():
        return str(DEFAULT_KUBECONFIG.expanduser())
    raise FlagsError(
        "no API service and no kubeconfig: pass --server URL (or set PHALANX_SERVER) for the "
        "Phalanx API service, or --kubeconfig PATH (or set KUBECONFIG) for the kube API"
    )


def _direct(kubeconfig: Path | None, context: str | None, namespace: str | None) -> DirectClient:
    """A client of the kube API from the kubeconfig; FlagsError when it cannot be used."""
    try:
        from kubernetes.config.config_exception import ConfigException

        from phalanx.cli.kubedirect import DirectClient
    except ImportError as error:  # the `cli` extra alone has no Kubernetes client
        message = f"--kubeconfig needs the Kubernetes client ({error}): install phalanx[cli,kube]"
        raise FlagsError(message) from error
    path = _kubeconfig_path(kubeconfig)
    try:
        return DirectClient.from_kubeconfig(path, context, namespace)
    except ConfigException as error:
        raise FlagsError(f"kubeconfig {path}: {error}") from error


def _open(
    server: str | None, token: str | None, kubeconfig: Path | None, context: str | None,
    namespace: str | None,
) -> RestClient | DirectClient:  # fmt: skip
    """The API service when a server is given, else the kube API; both at once is refused."""
    if server is None:
        if token is not None:
            raise FlagsError(
                "--token (PHALANX_TOKEN) is for --server; with a kubeconfig, its user's "
                "credentials are used"
            )
        return _direct(kubeconfig, context, namespace)
    if kubeconfig is not None or context is not None:
        given = "--kubeconfig" if kubeconfig is not None else "--context"
        raise FlagsError(
            f"--server (PHALANX_SERVER) and {given} are both given: use --server for the Phalanx "
            "API service, or --kubeconfig/--context for the kube API, not both"
        )
    return RestClient(server, token=token, namespace=namespace or "default")


@contextmanager
def connect(
    server: str | None, token: str | None, kubeconfig: Path | None, context: str | None,
    namespace: str | None,
) -> Iterator[Jobs]:  # fmt: skip
    """The backend the flags choose; API errors end the command with exit 1 and the API's words."""
    try:
        jobs = _open(server, token, kubeconfig, context, namespace)
    except FlagsError as error:
        Console(stderr=True).print(f"error: {error}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_FLAGS) from error
    where = server or "the kube API"
    try:
        with jobs:
            yield jobs
    except PhalanxAPIError as error:
        Console(stderr=True).print(f"error: {error}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_API_ERROR) from error
    except httpx.TransportError as error:
        Console(stderr=True).print(f"error: cannot reach {where}: {error}", markup=False)
        raise typer.Exit(EXIT_API_ERROR) from error
    except KeyboardInterrupt:  # Ctrl-C ends `watch` and `logs -f`: the usual way out, no trace
        raise typer.Exit(EXIT_INTERRUPTED) from None


def register(app: typer.Typer) -> None:
    """Add the cluster verbs to the `phalanx` app."""

    @app.command(rich_help_panel="Cluster")
    def submit(
        file: Annotated[Path, typer.Argument(help="A TrainingJob manifest (YAML).", exists=True,
                                             dir_okay=False)],
        server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None, output: Output = Format.text,
    ) -> None:  # fmt: skip
        """Create a job on the cluster from a manifest."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            print_job(jobs.create(file), output)

    @app.command(name="list", rich_help_panel="Cluster")
    def list_(
        server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None,
        all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A")] = False,
        phase: Annotated[str | None, typer.Option(help="Only this phase.")] = None,
        selector: Annotated[str | None, typer.Option("--selector", "-l")] = None,
        output: Output = Format.text,
    ) -> None:  # fmt: skip
        """List jobs (all pages)."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            pages = jobs.list(all_namespaces=all_namespaces, phase=phase, label_selector=selector)
            found = [job for page in pages for job in page.items]
        print_jobs(found, output)

    def one(action: Callable[[Jobs, str], JobDetail | None], help_text: str, name: str) -> None:
        def command(
            job: Name, server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
            context: KubeContext = None, namespace: Namespace = None, output: Output = Format.text,
        ) -> None:  # fmt: skip
            with connect(server, token, kubeconfig, context, namespace) as jobs:
                result = action(jobs, job)
                if result is not None:
                    print_job(result, output)

        command.__doc__ = help_text
        app.command(name=name, rich_help_panel="Cluster")(command)

    one(lambda jobs, job: jobs.get(job), "Show a job's status.", "get")
    one(lambda jobs, job: jobs.suspend(job), "Suspend a job (pods checkpoint and stop).", "suspend")
    one(lambda jobs, job: jobs.resume(job), "Resume a suspended job from its checkpoint.", "resume")
    one(lambda jobs, job: jobs.delete(job), "Delete a job and its pods.", "delete")

    @app.command(rich_help_panel="Cluster")
    def scale(
        job: Name, nodes: Annotated[int, typer.Argument(min=1, help="Desired node pods.")],
        server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None,
    ) -> None:  # fmt: skip
        """Set a job's desired node count (within replicas.min..max)."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            print_job(jobs.scale(job, nodes), Format.text)

    @app.command(rich_help_panel="Cluster")
    def logs(
        job: Name, server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None,
        node: Annotated[int, typer.Option(min=0, help="Node rank.")] = 0,
        follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
        tail: Annotated[int | None, typer.Option(min=1, help="Last lines only.")] = None,
    ) -> None:  # fmt: skip
        """Print a node's log (pod <job>-<epoch>-<node> of the current epoch)."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            for line in jobs.logs(job, node=node, follow=follow, tail_lines=tail):
                sys.stdout.write(line + "\n")

    @app.command(rich_help_panel="Cluster")
    def events(
        job: Name, server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None, output: Output = Format.text,
    ) -> None:  # fmt: skip
        """List a job's events, oldest first (as kubectl get events)."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            output_events(jobs.events(job), output)

    @app.command(rich_help_panel="Cluster")
    def describe(
        job: Name, server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None,
    ) -> None:  # fmt: skip
        """Show a job in one view: its state, conditions, restarts, failures, newest checkpoint
        and events (as kubectl describe)."""
        with connect(server, token, kubeconfig, context, namespace) as jobs:
            describe_job(jobs.get(job), jobs.events(job))

    @app.command(rich_help_panel="Cluster")
    def watch(
        job: Name, server: Server = None, token: Token = None, kubeconfig: Kubeconfig = None,
        context: KubeContext = None, namespace: Namespace = None,
    ) -> None:  # fmt: skip
        """Follow a job's progress live until it ends (or is deleted)."""
        console = Console(highlight=False)
        with (
            connect(server, token, kubeconfig, context, namespace) as jobs,
            Live(console=console) as live,
        ):
            for summary in jobs.progress(job):
                live.update(_watch_line(summary) if summary else Text(f"{job}  deleted"))


def _watch_line(summary: JobSummary) -> Text:
    phase = summary.phase or "-"
    return Text.assemble(
        (f"{summary.name}  ", "bold"), (phase, PHASE_STYLES.get(phase, "")),
        f"  epoch {summary.epoch}  nodes {summary.nodes}  world {summary.world_size}  "
        f"step {summary.step or 0}  restarts {summary.restarts}",
    )  # fmt: skip
