"""Where a recovery's seconds go: the failure, the restart decision, and the new epoch's start-up
stages as its rank 0 stamped them (`Heartbeat.startup`).

Why: a recovery time alone does not say what to make faster. Every recovery is split into the
same parts, in the job's events, in `phalanx run -o json` and in the benchmark.
"""

from __future__ import annotations

from datetime import datetime

from phalanx.models.heartbeat import Resume, StartupTimes

PARTS = ("detect", "assign", "start", "rendezvous", "build", "load", "first step", "report")
"""In order: failure -> restart decided -> workers spawned -> program running -> process group
and preflight -> model and data built -> checkpoint loaded -> first step done -> the operator
saw it."""


def parts(
    failed_at: datetime | None, decided: datetime, startup: StartupTimes | None, seen: datetime
) -> tuple[tuple[str, float], ...]:
    """The recovery's parts in seconds; () without the epoch's start-up stamps."""
    if startup is None or startup.spawned is None or startup.built is None:
        return ()
    begin = (failed_at or decided).timestamp()
    marks = [
        begin, decided.timestamp(), startup.spawned, startup.started, startup.rendezvous,
        startup.built, startup.loaded, startup.first_step, seen.timestamp(),
    ]  # fmt: skip
    return tuple(
        (name, round(max(marks[i + 1] - marks[i], 0.0), 3)) for i, name in enumerate(PARTS)
    )


def describe(seconds: float, parts: tuple[tuple[str, float], ...]) -> str:
    """`2.10 s after the failure (detect 0.10 s, assign 0.20 s, ...)` for an event message."""
    detail = ", ".join(f"{name} {value:.2f} s" for name, value in parts)
    return f"{seconds:.2f} s after the failure" + (f" ({detail})" if detail else "")


def describe_resume(resumed: Resume, redone: int | None) -> str:
    """`resumed from step 40 (memory), at least 7 steps redone`, or `from the start: no
    checkpoint yet`. At least: the steps are counted from the last step the heartbeat showed
    before the failure, and the trainer may have gone a few further."""
    if resumed.step is None:
        what = "from the start: no checkpoint yet"
    else:
        what = f"resumed from step {resumed.step}" + (
            f" ({resumed.source})" if resumed.source else ""
        )
    return what + (f", at least {redone} steps redone" if redone is not None else "")
