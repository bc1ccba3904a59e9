"""What `phalanx run` shows: a live panel of the job, its events as they happen, and a summary.

Why rich: a live view that redraws in place on a terminal and degrades to plain lines in CI logs
or pipes, without hand-written terminal control codes.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from phalanx.local import LocalRun, RunSummary
from phalanx.models.events import JobEvent
from phalanx.models.status import CheckpointRef, TrainingJobStatus

NOT_REPORTED = "not reported: the program reports no steps (see phalanx.progress)"

PHASE_STYLES = {
    "Running": "green",
    "Succeeded": "bold green",
    "Restarting": "yellow",
    "Pending": "cyan",
    "Suspended": "magenta",
    "Failed": "bold red",
}


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def eta(when: datetime | None, now: datetime | None = None) -> str:
    """An ETA for people: the time left and the clock time it is reached ("-": not known)."""
    if when is None:
        return "-"
    now = now or datetime.now(UTC)
    left = max((when - now).total_seconds(), 0.0)
    hours, rest = divmod(round(left), 3600)
    minutes, seconds = divmod(rest, 60)
    span = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
    return f"in {span} ({when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"


def _restarts(status: TrainingJobStatus) -> str:
    r = status.restarts
    return f"{r.total} (infrastructure {r.infrastructure}, application {r.application})"


class RunDisplay:
    """Live panel + event lines for one run, on `console` (stderr when stdout carries JSON)."""

    def __init__(self, console: Console, steps: int | None) -> None:
        self.console = console
        self.steps = steps
        self.started: datetime | None = None
        self.live = Live(console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> RunDisplay:
        if self.console.is_terminal:
            self.live.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.live.is_started:
            self.live.stop()

    def event(self, event: JobEvent) -> None:
        time = event.time or datetime.now(UTC)  # a run's events come with their time
        self.started = self.started or time
        offset = (time - self.started).total_seconds()
        style = "yellow" if event.type == "Warning" else "cyan"
        line = Text.assemble(
            (f"[{offset:7.1f}s] ", "dim"), (f"{event.reason:<14}", style), " ", event.message
        )
        self.console.print(line, highlight=False, soft_wrap=True)

    def update(self, run: LocalRun) -> None:
        if self.live.is_started:
            self.live.update(self._panel(run))

    def _panel(self, run: LocalRun) -> Panel:
        status = run.status
        progress = status.progress
        step = f"{progress.step if progress else '-'}" + (f" / {self.steps}" if self.steps else "")
        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column()
        phase = status.phase or "Pending"
        checkpoint = status.last_checkpoint
        table.add_row("phase", Text(phase, PHASE_STYLES.get(phase, "")), "epoch", str(status.epoch))
        nodes = f"{status.nodes} nodes" + (f", {status.spares} spares" if status.spares else "")
        table.add_row("step", step, "world size", f"{status.world_size} ({nodes})")
        table.add_row(
            "loss", _number(progress.loss if progress else None),
            "samples/s", _number(progress.samples_per_second if progress else None, 1),
        )  # fmt: skip
        table.add_row(
            "restarts", _restarts(status),
            "checkpoint", _checkpoint(checkpoint, status.checkpoint_interval_steps),
        )  # fmt: skip
        table.add_row("ETA", eta(progress.eta if progress else None), "", "")
        title = f"phalanx run {run.job.metadata.name}  ·  {run.elapsed:.0f} s"
        return Panel(table, title=title, title_align="left", expand=False)


def render_summary(console: Console, summary: RunSummary) -> None:
    """The end of the run, for people."""
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    phase = summary.phase or "-"
    table.add_row("phase", Text(phase, PHASE_STYLES.get(phase, "")))
    if summary.message:
        table.add_row("why", summary.message)
    progress = summary.progress
    table.add_row("steps", str(progress.step) if progress else NOT_REPORTED)
    if progress and progress.loss is not None:
        table.add_row("final loss", f"{progress.loss:.4f}")
    table.add_row(
        "world size", f"{summary.world_size} ({summary.nodes} nodes, epoch {summary.epoch})"
    )
    r = summary.restarts
    table.add_row(
        "restarts", f"{r.total}: infrastructure {r.infrastructure}, application {r.application}"
    )
    for failure in summary.failures:
        table.add_row(
            "failure",
            f"epoch {failure.epoch}: {failure.reason} ({failure.failure_class}) of {failure.pod}",
        )
    for index, seconds in enumerate(summary.recoveries):
        resume = summary.resumes[index] if index < len(summary.resumes) else None
        how = f"{seconds:.1f} s" + (f": {resume.describe()}" if resume else "")
        table.add_row("recovered in", how)
    if summary.goodput is not None and summary.lost_seconds is not None:
        lost = f"lost {summary.lost_seconds:.1f} s of {summary.duration_seconds:.1f} s"
        table.add_row("goodput", f"{summary.goodput:.1%} ({lost})")
    else:
        table.add_row("goodput", NOT_REPORTED if summary.lost_seconds is None else "-")
    checkpoint = summary.last_checkpoint
    table.add_row(
        "last checkpoint",
        f"{_checkpoint(checkpoint, summary.checkpoint_interval_steps)}: {checkpoint.path}"
        if checkpoint
        else "-",
    )
    table.add_row("run directory", summary.workdir)
    console.print(Panel(table, title=f"{summary.job}: summary", title_align="left", expand=False))


def _checkpoint(checkpoint: CheckpointRef | None, every: int | None) -> str:
    """`step 40 (every 10)`: the newest checkpoint and the cadence the program really kept."""
    if checkpoint is None:
        return "-"
    return f"step {checkpoint.step}" + (f" (every {every})" if every else "")
