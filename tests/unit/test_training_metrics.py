"""A job's training figures as Prometheus series: the step, throughput, loss and ETA its program
reported (`status.progress`), under the job's own `namespace` and `job` labels; a figure the
program does not report has no series, and a job that is gone leaves none behind."""

from __future__ import annotations

from datetime import UTC, datetime

from phalanx.models.status import Progress, TrainingJobStatus
from phalanx.operator.metrics import OperatorMetrics

LABELS = {"namespace": "team-a", "job": "llama"}
ETA = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def sample(metrics: OperatorMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(name, LABELS)


def test_the_programs_figures_are_series_of_the_job() -> None:
    metrics = OperatorMetrics()
    progress = Progress(step=120, samples_per_second=512.5, loss=2.25, total_steps=1000, eta=ETA)
    metrics.job_status("team-a", "llama", None, TrainingJobStatus(progress=progress))
    assert sample(metrics, "phalanx_training_step") == 120
    assert sample(metrics, "phalanx_training_samples_per_second") == 512.5
    assert sample(metrics, "phalanx_training_loss") == 2.25
    assert sample(metrics, "phalanx_training_eta_timestamp_seconds") == ETA.timestamp()


def test_what_is_not_reported_has_no_series() -> None:
    metrics = OperatorMetrics()
    first = TrainingJobStatus(progress=Progress(step=5, loss=3.0, samples_per_second=10.0))
    metrics.job_status("team-a", "llama", None, first)
    metrics.job_status("team-a", "llama", first, TrainingJobStatus(progress=Progress(step=6)))
    assert sample(metrics, "phalanx_training_step") == 6
    assert sample(metrics, "phalanx_training_loss") is None, "not the step before's"
    assert sample(metrics, "phalanx_training_samples_per_second") is None
    assert sample(metrics, "phalanx_training_eta_timestamp_seconds") is None

    metrics.forget("team-a", "llama")
    assert sample(metrics, "phalanx_training_step") is None
