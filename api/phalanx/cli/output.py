"""How the cluster verbs print jobs: kubectl's `-o` formats, so that a kubectl user's habits and
scripts carry over.

`text` (the default) is for reading; `wide` adds what does not fit a terminal's width (a list's
goodput, age and labels; a job's conditions); `name` is `trainingjob.phalanx.dev/<name>` a line,
for `xargs`; `json` and `yaml` are the whole objects, by the API's field names. An unknown
format is refused before anything is sent (exit 2, the choices named)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from phalanx.cli.display import PHASE_STYLES, eta
from phalanx.models import GROUP, KIND
from phalanx.models.responses import EventList, JobDetail, JobSummary
from phalanx.models.status import PROGRESS_REPORTED


class Format(StrEnum):
    """kubectl's output formats (`-o`), with `text` for its default."""

    text = "text"
    wide = "wide"
    name = "name"
    json = "json"
    yaml = "yaml"


RESOURCE = f"{KIND.lower()}.{GROUP}"
"""How `-o name` names a job, as kubectl does (`trainingjob.phalanx.dev/<name>`)."""


def job(detail: JobDetail, output: Format) -> None:
    """One job, in `output`."""
    if output is Format.json:
        sys.stdout.write(detail.model_dump_json(by_alias=True, exclude_none=True) + "\n")
    elif output is Format.yaml:
        document = detail.model_dump(mode="json", by_alias=True, exclude_none=True)
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))
    elif output is Format.name:
        sys.stdout.write(f"{RESOURCE}/{detail.name}\n")
    else:
        _job_text(detail, wide=output is Format.wide)


def jobs(found: Sequence[JobSummary], output: Format) -> None:
    """A list of jobs, in `output`."""
    documents = [j.model_dump(mode="json", by_alias=True) for j in found]
    if output is Format.json:
        sys.stdout.write(json.dumps(documents) + "\n")
    elif output is Format.yaml:
        sys.stdout.write(yaml.safe_dump(documents, sort_keys=False))
    elif output is Format.name:
        sys.stdout.write("".join(f"{RESOURCE}/{j.name}\n" for j in found))
    else:
        _jobs_table(found, wide=output is Format.wide)


def events(found: EventList, output: Format) -> None:
    """A job's events, oldest first, in `output` (`text` and `wide` as `kubectl get events`)."""
    documents = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in found.items]
    if output is Format.json:
        sys.stdout.write(json.dumps(documents) + "\n")
    elif output is Format.yaml:
        sys.stdout.write(yaml.safe_dump(documents, sort_keys=False))
    elif output is Format.name:
        sys.stdout.write("".join(f"event/{e.reason}\n" for e in found.items))
    else:
        _console().print(_events_table(found, wide=output is Format.wide))


def _events_table(found: EventList, *, wide: bool) -> Table:
    table = Table("LAST SEEN", "TYPE", "REASON", *(["COUNT"] if wide else []), "MESSAGE",
                  box=None, header_style="bold")  # fmt: skip
    now = datetime.now(UTC)
    for event in found.items:
        count = [str(event.count or 1)] if wide else []
        table.add_row(_age(event.time, now), event.type, event.reason, *count, event.message)
    return table


def describe(detail: JobDetail, found: EventList) -> None:
    """One job in one view, as `kubectl describe`: its state and conditions, restarts by
    class, the failures acted on, the newest checkpoint, and its events."""
    _job_text(detail, wide=True)
    console = _console()
    status = detail.status
    if status is not None:
        restarts = status.restarts
        console.print(f"Restarts: {restarts.total} (application {restarts.application}, "
                      f"infrastructure {restarts.infrastructure})")  # fmt: skip
        checkpoint = status.last_checkpoint
        where = f"step {checkpoint.step} at {checkpoint.path}" if checkpoint else "none yet"
        console.print(f"Last checkpoint: {where}")
        if status.failures:
            console.print("Failures (newest last):")
            table = Table("EPOCH", "CLASS", "REASON", "POD", "NODE", "EXIT", "MESSAGE",
                          box=None, header_style="bold")  # fmt: skip
            for failure in status.failures:
                table.add_row(str(failure.epoch), failure.failure_class, failure.reason,
                              failure.pod or "-", failure.node or "-",
                              "-" if failure.exit_code is None else str(failure.exit_code),
                              failure.message or "-")  # fmt: skip
            console.print(table)
    console.print("Events:" if found.items else "Events: none")
    if found.items:
        console.print(_events_table(found, wide=True))


def _console() -> Console:
    """A console for tables: a terminal's width where there is one; piped or captured, as wide
    as the rows are (kubectl's columns are never cut or wrapped for a script)."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = PIPED_WIDTH
    return console


PIPED_WIDTH = 10_000


def _jobs_table(found: Sequence[JobSummary], *, wide: bool) -> None:
    columns = ["NAMESPACE", "NAME", "PHASE", "NODES", "WORLD", "SPARES", "EPOCH", "STEP",
               "RESTARTS", "ETA"] + (["GOODPUT", "AGE", "LABELS"] if wide else [])  # fmt: skip
    table = Table(*columns, box=None, header_style="bold")
    now = datetime.now(UTC)
    for j in found:
        row = [j.namespace, j.name, j.phase or "-", str(j.nodes), str(j.world_size),
               str(j.spares), str(j.epoch), "-" if j.step is None else str(j.step),
               str(j.restarts), eta(j.eta) if j.phase == "Running" else "-"]  # fmt: skip
        if wide:
            goodput = "-" if j.goodput is None else f"{j.goodput:.1%}"
            labels = ",".join(f"{k}={v}" for k, v in sorted(j.labels.items())) or "-"
            row += [goodput, _age(j.created, now), labels]
        table.add_row(*row)
    _console().print(table)


def _age(created: datetime | None, now: datetime) -> str:
    """kubectl's AGE: the largest unit or two (45s, 12m, 3h20m, 5d)."""
    if created is None:
        return "-"
    seconds = max(0, int((now - created).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    return f"{seconds // 86400}d"


def _job_text(detail: JobDetail, *, wide: bool) -> None:
    status = detail.status
    phase = (status.phase if status else None) or "-"
    console = _console()
    console.print(
        Text.assemble(f"{detail.namespace}/{detail.name}  ", (phase, PHASE_STYLES.get(phase, "")))
    )
    if not status:
        return
    step = status.progress.step if status.progress else "-"  # none reported (yet)
    goodput = "-" if status.goodput is None else f"{status.goodput:.1%}"
    total = status.progress.total_steps if status.progress else None
    console.print(
        f"epoch {status.epoch}  nodes {status.nodes}  world {status.world_size}  "
        f"spares {status.spares}  step {step}{f' / {total}' if total else ''}  "
        f"restarts {status.restarts.total}  goodput {goodput}"
    )
    if phase == "Running" and status.progress is not None and status.progress.eta:
        console.print(f"ETA {eta(status.progress.eta)}")  # failures to come not counted
    unreported = next(
        (c for c in status.conditions if c.type == PROGRESS_REPORTED and c.status == "False"),
        None,
    )
    if unreported is not None:
        console.print(f"progress not reported: {unreported.message}")
    if wide and status.conditions:
        table = Table("CONDITION", "STATUS", "REASON", "MESSAGE", box=None, header_style="bold")
        for condition in status.conditions:
            table.add_row(condition.type, condition.status, condition.reason or "-",
                          condition.message or "-")  # fmt: skip
        console.print(table)
