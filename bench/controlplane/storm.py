"""The control-plane benchmark's failure storm: which nodes to lose, and where each hit job's
time to run again goes.

Why a timeline: "every hit job Running again in N s" says whether a target is met, not what
would close it. Each hit job's way back has four marks the watches see: the operator decides the
new epoch (its status shows it), the replacement pods are created, they run (kube-scheduler and
kwok), and the job is Running again (every agent acknowledged). Their quantiles over the hit
jobs say which stage the time is in.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from kubernetes import client as k8s

from bench.common.stats import quantile
from bench.common.tally import GROUP, PLURAL, VERSION, Tally

STAGES = ("decided", "pods_created", "pods_running", "running_again")
"""A hit job's marks after the storm, in order (seconds since the nodes were lost)."""


def storm_nodes(tally: Tally, jobs: int) -> tuple[list[str], set[str]]:
    """Nodes, fewest first, whose loss hits at least `jobs` jobs; and the jobs they hit."""
    with tally.lock:
        by_node: dict[str, set[str]] = {}
        for pod in tally.pods.values():
            if pod.node is not None and pod.phase == "Running":
                by_node.setdefault(pod.node, set()).add(pod.job)
    chosen: list[str] = []
    hit: set[str] = set()
    for node in sorted(by_node):
        if len(hit) >= jobs:
            break
        chosen.append(node)
        hit |= by_node[node]
    return chosen, hit


def failures(
    custom: k8s.CustomObjectsApi, namespace: str, hit: set[str], epochs: dict[str, int]
) -> dict[str, int]:
    """The failures the hit jobs recorded after the storm began, by reason (one per lost node
    when every restart is the one it needs)."""
    found: Counter[str] = Counter()
    for name in hit:
        job = cast(dict[str, Any],
                   custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))  # fmt: skip
        status = job.get("status") or {}
        found.update(
            f["reason"] for f in status.get("failures") or [] if f["epoch"] >= epochs[name]
        )
    return dict(found.most_common())


def marks(tally: Tally, job: str, epoch: int, since: float) -> dict[str, float] | None:
    """One hit job's marks (seconds after `since`); None until it runs again. A job whose
    lost pods all had stand-ins needs no new pod: its pod marks are its decision's."""
    again = tally.running_again(job, epoch)
    with tally.lock:
        decided = min((t for (name, e), t in tally.epoch_at.items() if name == job and e > epoch),
                      default=None)  # fmt: skip
        new = [pod for pod, seen in tally.pods.items() if seen.job == job
               and tally.created.get(pod, 0.0) > since]  # fmt: skip
        created = max((tally.created[pod] for pod in new), default=decided)
        running = [tally.running.get(pod) for pod in new]
    if decided is None or again is None or created is None:
        return None
    ran = max((t for t in running if t is not None), default=created) if new else decided
    times = (decided, created, ran, again)
    return {stage: round(t - since, 3) for stage, t in zip(STAGES, times, strict=True)}


def timeline(
    tally: Tally, hit: set[str], epochs: dict[str, int], since: float
) -> dict[str, dict[str, float]]:
    """Each stage's p50 and p99 over the hit jobs (seconds after the nodes were lost)."""
    found = [m for m in (marks(tally, job, epochs[job], since) for job in hit) if m is not None]
    return {
        stage: {"p50": quantile([m[stage] for m in found], 0.5),
                "p99": quantile([m[stage] for m in found], 0.99)}
        for stage in STAGES
    } if found else {}  # fmt: skip
