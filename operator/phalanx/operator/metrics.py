"""The operator's Prometheus metrics, in one place (JobSet's metrics.go habit).

Names follow Prometheus conventions: `phalanx_` prefix, `_total` counters, `_seconds`
histograms, labels bounded to namespace, job, class and phase (never pod names or UIDs).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from phalanx.models.conditions import ConditionType
from phalanx.models.status import TrainingJobStatus

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""Seconds, for a reconcile and its parts: a quantile past the last one reads as that value
(the control-plane benchmark reports it as a floor)."""

PHASES = ("Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed")


class _JobsByPhase(Collector):
    """`phalanx_jobs{phase}`, computed at scrape time from the latest phase of each job."""

    def __init__(self) -> None:
        self._phases: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def set(self, key: tuple[str, str], phase: str | None) -> None:
        with self._lock:
            if phase is None:
                self._phases.pop(key, None)
            else:
                self._phases[key] = phase

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            tally = Tally(self._phases.values())
        family = GaugeMetricFamily("phalanx_jobs", "TrainingJobs by phase", labels=["phase"])
        for phase in PHASES:
            family.add_metric([phase], tally.get(phase, 0))
        yield family


class OperatorMetrics:
    """Every metric the operator exports, on its own registry (tests run several operators)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._jobs = _JobsByPhase()
        self.registry.register(self._jobs)
        labels = ["namespace", "job"]
        self.leader = Gauge(
            "phalanx_operator_leader",
            "1 while this replica holds the leader Lease and acts; 0 while it stands by",
            registry=self.registry,
        )
        self.restarts = Counter(
            "phalanx_restarts", "Gang restarts by failure class", [*labels, "class"],
            registry=self.registry,
        )  # fmt: skip
        self.world_size = Gauge(
            "phalanx_world_size", "Worker processes in the current epoch", labels,
            registry=self.registry,
        )  # fmt: skip
        self.goodput = Gauge(
            "phalanx_goodput_ratio", "Share of wall time spent on kept training", labels,
            registry=self.registry,
        )  # fmt: skip
        self.recovery = Histogram(
            "phalanx_recovery_seconds", "Failure to the new epoch's first training step",
            ["class"],
            buckets=(0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )  # fmt: skip
        self.recovery_part = Histogram(
            "phalanx_recovery_part_seconds",
            "Where recoveries go: detect, assign, start, rendezvous, build, load, first step, "
            "report", ["part"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300), registry=self.registry,
        )  # fmt: skip
        self.lost = Counter(
            "phalanx_lost_training_seconds",
            "Training time lost to failures: recovery plus work since the last checkpoint",
            labels, registry=self.registry,
        )  # fmt: skip
        self.progress_reported = Gauge(
            "phalanx_progress_reported",
            "1 once the job's program reported a step, 0 while it is known to report none "
            "(then goodput and recovery to the first step are not measured)", labels,
            registry=self.registry,
        )  # fmt: skip
        self.step = Gauge(
            "phalanx_training_step", "The job's last optimizer step its program reported",
            labels, registry=self.registry,
        )  # fmt: skip
        self.samples_per_second = Gauge(
            "phalanx_training_samples_per_second",
            "The job's throughput over its program's last heartbeat", labels,
            registry=self.registry,
        )  # fmt: skip
        self.loss = Gauge(
            "phalanx_training_loss", "The training loss at the job's last reported step", labels,
            registry=self.registry,
        )  # fmt: skip
        self.eta = Gauge(
            "phalanx_training_eta_timestamp_seconds",
            "When the job is expected to reach its total steps (Unix time; failures to come "
            "are not in it)", labels, registry=self.registry,
        )  # fmt: skip
        self.spares = Gauge(
            "phalanx_spares", "Hot spares ready to take a failed node's rank", labels,
            registry=self.registry,
        )  # fmt: skip
        self.reconcile = Histogram(
            "phalanx_reconcile_duration_seconds", "Time to plan and execute one reconcile",
            buckets=RECONCILE_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.reconcile_part = Histogram(
            "phalanx_reconcile_part_seconds",
            "Where a reconcile's time goes: wait (queued for a free slot, one per API thread, "
            "before it began), plan (in the event loop), execute (carrying out the plan), api "
            "(of execute, waiting for the API server's answers) and own (plan and execute less "
            "api: the operator's own time)", ["part"],
            buckets=(0.001, *RECONCILE_BUCKETS), registry=self.registry,
        )  # fmt: skip

    def job_status(
        self, namespace: str, job: str, old: TrainingJobStatus | None, new: TrainingJobStatus
    ) -> None:
        """Update per-job metrics from a status transition."""
        before = old.restarts if old else None
        for failure_class in ("application", "infrastructure"):
            grew = getattr(new.restarts, failure_class) - (
                getattr(before, failure_class) if before else 0
            )
            if grew > 0:
                self.restarts.labels(namespace, job, failure_class).inc(grew)
        self.world_size.labels(namespace, job).set(new.world_size)
        self.spares.labels(namespace, job).set(new.spares)
        lost = new.lost_seconds - (old.lost_seconds if old else 0.0)
        if lost > 0:
            self.lost.labels(namespace, job).inc(lost)
        if new.goodput is not None:
            self.goodput.labels(namespace, job).set(new.goodput)
        else:  # not measured (a program that reports no steps): no series, not a stale one
            with contextlib.suppress(KeyError):
                self.goodput.remove(namespace, job)
        self._progress(namespace, job, new)
        reported = next(
            (c for c in new.conditions if c.type == ConditionType.PROGRESS_REPORTED), None
        )
        if reported is not None:
            self.progress_reported.labels(namespace, job).set(int(reported.status == "True"))
        self._jobs.set((namespace, job), new.phase)

    def _progress(self, namespace: str, job: str, status: TrainingJobStatus) -> None:
        """The program's reported step, throughput, loss and ETA; a figure it does not report
        has no series (not a stale or a made-up one)."""
        progress = status.progress
        eta = None if progress is None or progress.eta is None else progress.eta.timestamp()
        figures = (
            (self.step, None if progress is None else progress.step),
            (self.samples_per_second, None if progress is None else progress.samples_per_second),
            (self.loss, None if progress is None else progress.loss),
            (self.eta, eta),
        )
        for gauge, value in figures:
            if value is None:
                with contextlib.suppress(KeyError):
                    gauge.remove(namespace, job)
            else:
                gauge.labels(namespace, job).set(value)

    def forget(self, namespace: str, job: str) -> None:
        """A job is gone: drop its series."""
        self._jobs.set((namespace, job), None)
        gauges = (self.world_size, self.goodput, self.spares, self.lost, self.progress_reported,
                  self.step, self.samples_per_second, self.loss, self.eta)  # fmt: skip
        for metric in gauges:
            with contextlib.suppress(KeyError):
                metric.remove(namespace, job)
        for failure_class in ("application", "infrastructure"):
            with contextlib.suppress(KeyError):
                self.restarts.remove(namespace, job, failure_class)
