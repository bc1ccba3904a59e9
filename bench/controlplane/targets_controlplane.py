"""The control plane's targets (issue 30), checked against one run's `bench.controlplane.controlplane`
figures: the largest run of its series (pods created, beside the baselines measured in the same
run; reconcile p99; peak RSS; 409s; the storm, per job). Kept apart from `bench.targets`, which
reads them with the rest."""

from __future__ import annotations

from bench.common.target_base import Checker, Figures, KindRecords, Measured
from phalanx.operator.metrics import RECONCILE_BUCKETS

MB_PER_MIB = 2**20 / 10**6
RECONCILE_TOP_BUCKET = float(RECONCILE_BUCKETS[-1])
"""The last finite bucket of the operator's reconcile histograms: a quantile past it reads as
this value, so it means "at least"."""
PODS_TARGET = 8000
LARGE_JOB_PODS = 2000


def reconcile_latency(seconds: float) -> str:
    """A reconcile (or reconcile part) quantile in ms, or a floor where it is past the
    histogram's last bucket."""
    if seconds >= RECONCILE_TOP_BUCKET:
        return f">= {RECONCILE_TOP_BUCKET * 1000:.0f} ms (past the last bucket)"
    return f"{seconds * 1000:.0f} ms"


def _largest(results: Figures) -> Figures | None:
    series = results.get("controlplane", {}).get("series") or []
    return series[-1] if series else None


def _pods_created(results: Figures, _: KindRecords) -> list[Measured]:
    last = _largest(results)
    if last is None:
        return []
    return [Measured(f"{last['pods']} pods in {last['all_created']:.1f} s",
                     last["pods"] >= PODS_TARGET and last["all_created"] <= 60)]  # fmt: skip


def _pods_created_vs(system: str, within: float) -> Checker:
    """All pods created within `within` x the baseline's time, measured in the same run."""

    def check(results: Figures, _: KindRecords) -> list[Measured]:
        last = _largest(results)
        theirs = _baseline(last, system)
        if last is None or theirs is None:
            return []
        ratio = last["all_created"] / theirs["all_created"]
        alike = _baseline(last, SAME_PODS)
        beside = (f"; the Job controller with Phalanx's pods, a headless Service and env ConfigMap per Job: "
                  f"{alike['all_created']:.1f} s ({last['all_created'] / alike['all_created']:.2f}x)"
                  if alike is not None and system == "kube Job controller" else "")  # fmt: skip
        return [Measured(f"{last['all_created']:.1f} s vs {theirs['all_created']:.1f} s "
                         f"({ratio:.2f}x) at {last['jobs']} jobs{beside}",
                         _at_jobs(ratio <= within, last))]  # fmt: skip

    return check


SAME_PODS = "kube Job controller, Phalanx's pods"
"""The like-for-like pass (`baselines.phalanx_template`), shown beside the bare one."""


def _baseline(last: Figures | None, system: str) -> Figures | None:
    """The baseline of `system` (its name, or the first words of it) in the largest run."""
    found = (last or {}).get("baselines", [])
    return next((b for b in found if b["system"] == system or b["system"].startswith(system + " ")),
                None)  # fmt: skip


def _at_jobs(met: bool, last: Figures) -> bool:
    return met and last["jobs"] >= 1000


def _reconcile_p99(results: Figures, _: KindRecords) -> list[Measured]:
    last = _largest(results)
    if last is None:
        return []
    parts = last.get("reconcile_parts", {})
    if "own" not in parts:  # an operator that did not count its API time
        return [Measured(f"{reconcile_latency(last['reconcile_p99'])} at {last['jobs']} jobs",
                         _at_jobs(last["reconcile_p99"] <= 1.0, last))]  # fmt: skip
    own = parts["own"]["p99"]
    return [Measured(f"the operator's own {reconcile_latency(own)} (the whole reconcile "
                     f"{reconcile_latency(last['reconcile_p99'])}, of which waiting on the API "
                     f"server {reconcile_latency(parts['api']['p99'])}; queued for a slot before "
                     f"it {reconcile_latency(parts['wait']['p99'])}) at {last['jobs']} jobs",
                     _at_jobs(own <= 1.0, last))]  # fmt: skip


def _operator_rss(results: Figures, _: KindRecords) -> list[Measured]:
    last = _largest(results)
    if last is None:
        return []
    rss_mb = last["peak_rss_mib"] * MB_PER_MIB
    return [Measured(f"{rss_mb:.0f} MB at {last['jobs']} jobs", _at_jobs(rss_mb <= 300, last))]


def _conflicts(results: Figures, _: KindRecords) -> list[Measured]:
    last = _largest(results)
    if last is None or not last.get("api_by_code"):
        return []
    codes = {str(k): v for k, v in last["api_by_code"].items()}
    share = codes.get("409", 0) / sum(codes.values())
    return [Measured(f"{share:.1%} ({codes.get('409', 0)} of {sum(codes.values())} requests "
                     f"at {last['jobs']} jobs)", _at_jobs(share <= 0.01, last))]  # fmt: skip


def _storm(results: Figures, _: KindRecords) -> list[Measured]:
    last = _largest(results)
    if last is None or "storm_recovered" not in last:
        return []
    if "storm_job_p99" not in last:  # a run from before each job was timed: the storm as a whole
        return [Measured(f"not per job: all {last['storm_jobs']} hit jobs Running again "
                         f"{last['storm_recovered']:.1f} s after {last['storm_nodes']} nodes were "
                         "lost", None)]  # fmt: skip
    running = last.get("storm_timeline", {}).get("pods_running")
    whole = f"p99 {last['storm_job_p99']:.1f} s (p50 {last['storm_job_p50']:.1f} s)"
    where = (f"over the {last['storm_jobs']} jobs hit by {last['storm_nodes']} lost nodes at "
             f"{last['jobs']} jobs")  # fmt: skip
    if running is None:  # a run from before the stages were timed: the job's phase, stricter
        return [Measured(f"the job Running again {whole} {where}",
                         _at_jobs(last["storm_job_p99"] <= 10.0, last))]  # fmt: skip
    # The target's measure: the new epoch's pods all Running. The job's phase turns Running
    # later, once every agent acknowledged the epoch (the simulated fleet's answers): shown beside.
    return [Measured(f"the new epoch's pods all Running p99 {running['p99']:.1f} s "
                     f"(p50 {running['p50']:.1f} s); the job Running again (every agent "
                     f"acknowledged) {whole}; {where}", _at_jobs(running["p99"] <= 10.0, last))]  # fmt: skip


def _large_job(results: Figures) -> Figures | None:
    found = results.get("large_job")
    return found if found is not None and found["pods"] >= LARGE_JOB_PODS else None


def _large_job_created(results: Figures, _: KindRecords) -> list[Measured]:
    large = _large_job(results)
    if large is None or "baseline" not in large:
        return []
    theirs = large["baseline"]["all_created"]
    alike = large.get("baseline_same_pods")
    beside = (f"; an Indexed Job of Phalanx's pods with a headless Service and env ConfigMap: "
              f"{alike['all_created']:.1f} s ({large['all_created'] / alike['all_created']:.2f}x)"
              if alike else "")  # fmt: skip
    return [Measured(f"{large['all_created']:.1f} s vs {theirs:.1f} s "
                     f"({large['created_ratio']:.2f}x) for {large['pods']} pods{beside}",
                     large["created_ratio"] <= 1.25)]  # fmt: skip


def _fan_out(results: Figures, _: KindRecords) -> list[Measured]:
    large = _large_job(results)
    if large is None:
        return []
    ack, fan_out = large["acknowledged"], large["fan_out"]
    if fan_out is None:
        return [Measured(f"not complete: {ack['acknowledged']} of {ack['pods']} acknowledged",
                         False)]  # fmt: skip
    return [Measured(f"{fan_out:.1f} s (p50 {ack['p50']:.1f} s) for {large['pods']} simulated "
                     f"agents; job Running again {large['restart_running_again']:.1f} s after "
                     f"the failure, {large['restart_new_pods']} pods replaced",
                     fan_out <= 5.0)]  # fmt: skip


CONTROLPLANE_CHECKERS: dict[str, Checker] = {
    "pods-created": _pods_created,
    "pods-created-vs-job-controller": _pods_created_vs("kube Job controller", 1.25),
    "pods-created-vs-kubeflow": _pods_created_vs("Kubeflow", 1.0),
    "reconcile-p99": _reconcile_p99,
    "operator-rss": _operator_rss,
    "conflicts": _conflicts,
    "storm-p99": _storm,
    "largejob-created-vs-job-controller": _large_job_created,
    "fanout-2000": _fan_out,
}
