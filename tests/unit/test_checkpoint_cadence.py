"""The checkpoint cadence a program really keeps, and the one its spec asks for.

Covers: the status learns the cadence from the checkpoints a program reports, as its reporter
kept it (a heartbeat that skipped a checkpoint does not double it; an older or repeated report
changes nothing); `GET .../checkpoints` shows it beside the spec's, and says why
when it is unknown; the resume library reads spec.checkpoint from the pod's variables, and a bad
one is refused with its name.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.jobs import job_model
from phalanx.control import views
from phalanx.models import TrainingJob, env
from phalanx.models.heartbeat import Heartbeat
from phalanx.models.status import CheckpointRef, TrainingJobStatus
from phalanx.progress import Reporter
from phalanx.resume.settings import CheckpointSettings, SettingsError


def _ref(step: int, previous: int | None = None) -> CheckpointRef:
    return CheckpointRef(
        step=step, path=f"/ckpt/step-{step}", time=datetime.now(UTC), previous_step=previous
    )


def _job(status: TrainingJobStatus | None, interval: int = 100) -> TrainingJob:
    stored = status.model_dump(by_alias=True, exclude_none=True) if status else None
    checkpoint = {"intervalSteps": interval}
    return job_model(replicas={"min": 1, "max": 2}, checkpoint=checkpoint, status=stored)


def test_the_status_learns_the_cadence_from_reported_checkpoints() -> None:
    status = TrainingJobStatus()
    status.record_checkpoint(_ref(10))
    assert (_last_step(status), status.checkpoint_interval_steps) == (10, None), "no cadence yet"
    status.record_checkpoint(_ref(20, previous=10))
    status.record_checkpoint(_ref(20, previous=10))  # the same one, reported again
    status.record_checkpoint(_ref(10))  # an older one (a late report)
    assert _last_step(status) == 20
    assert status.checkpoint_interval_steps == 10
    status.record_checkpoint(_ref(45, previous=20))
    assert (_last_step(status), status.checkpoint_interval_steps) == (45, 25)


def test_a_checkpoint_the_heartbeats_skipped_does_not_double_the_cadence() -> None:
    """A fast program commits step 30 and step 40 between two heartbeats: the status sees 20
    and then 40, and the cadence is still the program's 10 (a CI run on kind saw 20 here)."""
    status = TrainingJobStatus()
    status.record_checkpoint(_ref(20, previous=10))
    status.record_checkpoint(_ref(40, previous=30))
    assert status.checkpoint_interval_steps == 10
    status.record_checkpoint(_ref(50))  # a new process's first: the cadence it had stays
    assert (_last_step(status), status.checkpoint_interval_steps) == (50, 10)


def test_the_reporter_says_which_checkpoint_came_before(tmp_path: Path) -> None:
    reporter = Reporter(path=tmp_path / "beat.json", epoch=1)
    reporter.report(1)
    reporter.checkpoint(10, "/ckpt/10")
    reporter.checkpoint(20, "/ckpt/20")
    beat = Heartbeat.model_validate_json((tmp_path / "beat.json").read_text())
    assert beat.checkpoint is not None
    assert (beat.checkpoint.step, beat.checkpoint.previous_step) == (20, 10)


def _last_step(status: TrainingJobStatus) -> int | None:
    return status.last_checkpoint.step if status.last_checkpoint else None


def test_the_checkpoint_view_shows_what_the_program_did_beside_what_the_spec_asked() -> None:
    status = TrainingJobStatus()
    status.record_checkpoint(_ref(10))
    status.record_checkpoint(_ref(20, previous=10))
    view = views.checkpoints(_job(status, interval=100))
    assert (view.interval_steps, view.requested_interval_steps) == (10, 100)
    assert view.last is not None
    assert view.last.step == 20
    assert view.note is None
    assert view.location == "/ckpt"


@pytest.mark.parametrize(
    ("reported", "why"), [((), "no checkpoint reported"), ((10,), "one checkpoint reported")]
)
def test_an_unknown_cadence_is_null_and_says_why(reported: tuple[int, ...], why: str) -> None:
    status = TrainingJobStatus()
    for step in reported:
        status.record_checkpoint(_ref(step))
    view = views.checkpoints(_job(status if reported else None))
    assert view.interval_steps is None
    assert view.note is not None
    assert why in view.note
    assert view.model_dump(by_alias=True)["requestedIntervalSteps"] == 100


def test_the_library_reads_the_spec_from_the_pod() -> None:
    settings = CheckpointSettings.from_env({
        env.PHALANX_CHECKPOINT_DIR: "/ckpt", env.PHALANX_CHECKPOINT_INTERVAL_STEPS: "25",
        env.PHALANX_CHECKPOINT_KEEP: "5", env.PHALANX_CHECKPOINT_ASYNC: "false",
        env.PHALANX_CHECKPOINT_INTERVAL_SECONDS: "600",
        env.PHALANX_CHECKPOINT_MEMORY_INTERVAL_STEPS: "0",
        env.PHALANX_COLLECTIVE_TIMEOUT_SECONDS: "60",
    })  # fmt: skip
    assert settings == CheckpointSettings(
        location="/ckpt", interval_steps=25, interval_seconds=600, keep=5, async_save=False,
        memory_interval_steps=0, collective_timeout_seconds=60,
    )  # fmt: skip
    url = {env.PHALANX_CHECKPOINT_URL: "s3://b/j", env.PHALANX_CHECKPOINT_DIR: "/ignored"}
    assert CheckpointSettings.from_env(url).location == "s3://b/j"
    assert CheckpointSettings.from_env({}) == CheckpointSettings(), "outside a pod: defaults"


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        (env.PHALANX_CHECKPOINT_INTERVAL_STEPS, "ten", "not a whole number"),
        (env.PHALANX_CHECKPOINT_INTERVAL_STEPS, "0", "must be at least 1"),
        (env.PHALANX_CHECKPOINT_KEEP, "-1", "must be at least 1"),
        (env.PHALANX_CHECKPOINT_ASYNC, "maybe", "not true or false"),
    ],
)
def test_a_bad_variable_is_refused_by_name(name: str, value: str, why: str) -> None:
    with pytest.raises(SettingsError, match=f"{name}='{value}': {why}"):
        CheckpointSettings.from_env({name: value})
