"""Kueue on kind: TrainingJobs admitted through Workloads the operator owns, by Kueue v0.17.0 built
from its Go module (`tests/tools/kind.sh kueue`: waitForPodsReady on, 120 s).

Covers: two elastic jobs (min 2, max 4) in one ClusterQueue with quota for 6 node pods wait
Suspended without a pod until their LocalQueue exists, then are admitted partially (4 and 2,
never more than 6 together) and run exactly the pods admitted, none scheduled before admission
(pod events); the one at 2 asks Kueue to grow with a Workload of its own, and grows to 4 only
once the other is deleted and Kueue admits that request; a higher-priority job preempts an elastic one, which saves the step it reached and
stops (nothing redone), waits Suspended while the other trains, and resumes when the quota frees,
its loss trajectory within 1e-4 of an uninterrupted run with every sample once; a queued job whose
pod is deleted restarts in place past epoch 1, the replacement scheduled beside its carried-over
peers, without Kueue evicting it (its PodsReady goes to WaitForRecovery and back to Recovered).
A queue name Kueue's Workload refuses is a ConfigurationError naming the field. Figures
(admission to training, eviction to stopped, a pod replaced) go to the report
(`bench.kind.kind_scheduling`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from phalanx.models.labels import KUEUE_QUEUE
from phalanx.models.names import workload_name
from tests.e2e.cluster import (
    KIND_SH,
    KindCluster,
    api_seconds,
    first_step_after,
    for_kind,
    record,
    run,
    wait_for,
)
from tests.e2e.jobs import training_job
from tests.e2e.training import reference_losses, replace_a_pod, trained_and_resumed
from tests.support.gang import check_exactly_once, trajectory

# The first case also sets up Kueue (`kueue` below: its image built, loaded into every node and
# rolled out, up to 900 s on a busy 2-core machine), within its test's time: pytest-timeout counts
# a fixture's setup as the test's, and its 300 s ran out there in a full run.
pytestmark = pytest.mark.timeout(900 + 900)

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
FLAVOR = "phalanx-e2e"
LOCAL_QUEUE = "training"
POD_CPU_MILLI = 100
"""Each node pod asks for this much CPU and no fake GPU: quota, not nodes, is what runs short."""
GLOBAL_BATCH = 12  # training_job's
DATASET = 240  # the trainer's default
LOW, HIGH = "phalanx-e2e-low", "phalanx-e2e-high"
GROW_COOLDOWN_SECONDS = float(
    yaml.safe_load((Path(__file__).parent / "values-kind.yaml").read_text())["operator"][
        "growCooldownSeconds"
    ]
)
"""The suite's operator grows a job no sooner than this after it started running."""
STEPS_TO_GROW = 1000
"""Steps of each job sharing the quota: the partial one still trains long after it grew (0.2 s a
step); the test ends there."""


@pytest.fixture(scope="module")
def kueue(kind: KindCluster, phalanx: str) -> KindCluster:
    """Kueue's controller on the cluster (installed once; the operator finds its API without a
    restart), a ResourceFlavor, and two PriorityClasses."""
    run(["bash", str(KIND_SH), "kueue"], timeout=900)
    _apply(kind, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                  "metadata": {"name": FLAVOR}})  # fmt: skip
    scheduling = k8s.SchedulingV1Api(kind.core.api_client)
    for name, value in ((LOW, 100), (HIGH, 1000)):
        try:
            scheduling.create_priority_class(
                k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=value)
            )
        except ApiException as error:
            if error.status != 409:
                raise
    return kind


@pytest.fixture
def cluster_queue(kueue: KindCluster, namespace: str) -> Iterator[str]:
    """A ClusterQueue for this test's namespace (named after it; deleted afterwards), quota set by
    `quota`; preemption within it by priority."""
    yield namespace
    try:
        kueue.custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", namespace)
    except ApiException as error:
        if error.status != 404:
            raise


def quota(kind: KindCluster, namespace: str, pods: int) -> None:
    """The namespace's ClusterQueue with CPU for `pods` node pods (memory plentiful)."""
    _apply(kind, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
        "metadata": {"name": namespace},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": FLAVOR, "resources": [
                    {"name": "cpu", "nominalQuota": f"{pods * POD_CPU_MILLI}m"},
                    {"name": "memory", "nominalQuota": "512Gi"},
                ]}],
            }],
        },
    })  # fmt: skip


def local_queue(kind: KindCluster, namespace: str) -> None:
    kind.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": namespace},
    })  # fmt: skip


def queued_job(name: str, *, steps: int, nodes: tuple[int, int], priority: str | None = None,
               step_delay: float = 0.2) -> dict[str, Any]:  # fmt: skip
    """The reference trainer in the test's LocalQueue, each node pod asking for CPU only."""
    job = training_job(name, steps=steps, nodes=nodes, gpus=None, step_delay=step_delay)
    job["metadata"]["labels"] = {KUEUE_QUEUE: LOCAL_QUEUE}
    [container] = job["spec"]["template"]["spec"]["containers"]
    container["resources"] = {"requests": {"cpu": f"{POD_CPU_MILLI}m"}}
    if priority:
        job["spec"]["priorityClassName"] = priority
    return for_kind(job)


def workload(kind: KindCluster, namespace: str, job: str) -> dict[str, Any]:
    return cast(dict[str, Any], kind.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads", workload_name(job)
    ))  # fmt: skip


def admitted(found: dict[str, Any]) -> int | None:
    """The node pods Kueue admitted (its pod set's count), while admitted and not evicted."""
    status = found.get("status") or {}
    if _condition(status, "Evicted", "True") or not _condition(status, "Admitted", "True"):
        return None
    [assignment] = status["admission"]["podSetAssignments"]
    return int(assignment.get("count", found["spec"]["podSets"][0]["count"]))


def condition_time(found: dict[str, Any], kind: str) -> float:
    condition = _condition(found.get("status") or {}, kind, "True")
    assert condition is not None, f"{kind} not True: {found.get('status')}"
    return api_seconds(condition["lastTransitionTime"])


def scheduled_pods(kind: KindCluster, namespace: str, job: str) -> dict[str, float]:
    """Every pod of `job` the scheduler ever placed, from the namespace's Scheduled events: its
    name and when (pods come and go; their events stay)."""
    events = kind.core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    placed: dict[str, float] = {}
    for event in events:
        pod = str(event.involved_object.name)
        when = event.event_time or event.first_timestamp or event.metadata.creation_timestamp
        if pod.startswith(f"{job}-"):
            placed[pod] = min(placed.get(pod, when.timestamp()), when.timestamp())
    return placed


def log_of(kind: KindCluster, namespace: str, job: str) -> Path:
    return kind.shared_dir(namespace) / job / "log"


def steps_in(log: Path) -> list[dict[str, Any]]:
    path = log / "losses.jsonl"
    if not path.exists():
        return []
    return [r for r in map(_json, path.read_text().splitlines()) if r is not None]


def test_two_elastic_jobs_share_a_quota_by_partial_admission(
    kueue: KindCluster, namespace: str, cluster_queue: str
) -> None:
    kind = kueue
    quota(kind, namespace, pods=6)
    for name in ("first", "second"):
        kind.create_job(namespace, queued_job(name, steps=STEPS_TO_GROW, nodes=(2, 4)))
        waiting = kind.wait_status(namespace, name, _suspended("WaitingForAdmission"),
                                   "Suspended, waiting for admission", timeout=120)  # fmt: skip
        assert waiting["nodes"] == 0
    assert kind.node_pods(namespace, "first") + kind.node_pods(namespace, "second") == [], (
        "no pod before Kueue admits the job"
    )
    local_queue(kind, namespace)
    sizes: dict[str, int] = {}
    for name in ("first", "second"):
        kind.wait_status(namespace, name, lambda s: s.get("phase") == "Running",
                         "Running once admitted", timeout=300)  # fmt: skip
        found = workload(kind, namespace, name)
        count = admitted(found)
        assert count is not None, found.get("status")
        sizes[name] = count
        status = kind.status(namespace, name)
        assert status["nodes"] == count, f"{name} runs at its admitted size: {status}"
        losses = log_of(kind, namespace, name) / "losses.jsonl"
        first_step = wait_for(partial(first_step_after, losses, 0), 120, f"{name}'s first step")
        share = "full" if count == 4 else "partial"  # whichever Kueue takes first gets 4
        record(f"kueue-admitted-{share}", job=name, admitted_pods=count,
               admission_to_first_step_s=round(first_step[1]
                                               - condition_time(found, "Admitted"), 1))  # fmt: skip
    assert sorted(sizes.values()) == [2, 4], f"partial admission within 6 pods: {sizes}"
    for name, count in sizes.items():
        placed = scheduled_pods(kind, namespace, name)
        assert len(placed) == count, f"{name} ran pods Kueue did not admit: {sorted(placed)}"
        admitted_at = condition_time(workload(kind, namespace, name), "QuotaReserved")
        assert min(placed.values()) >= admitted_at - 1, "a pod placed before its admission"
    small, large = sorted(sizes, key=sizes.__getitem__)
    _grows_once_the_quota_frees(kind, namespace, small, large)


def _grows_once_the_quota_frees(kind: KindCluster, namespace: str, small: str, large: str) -> None:
    """The job admitted at 2 asks Kueue to grow (a Workload of its own) and waits, no pod made
    for it; once the other job is deleted, Kueue admits the request, the first Workload is
    handed back, and the job grows to 4 as a planned resize (no failure, no restart)."""
    asked = wait_for(lambda: _growth(kind, namespace, small), 120,
                     f"{small}'s request to grow")  # fmt: skip
    assert admitted(asked) is None, f"no quota left, yet admitted: {asked.get('status')}"
    before = kind.status(namespace, small)
    cooled = api_seconds(before["current"]["runningTime"]) + GROW_COOLDOWN_SECONDS
    wait_for(lambda: time.time() >= cooled or None, GROW_COOLDOWN_SECONDS + 10,
             f"{small} running for the operator's grow cooldown")  # fmt: skip
    kind.kubectl("delete", "trainingjob", large, "-n", namespace, "--wait=false")
    freed_at = time.time()
    grown = kind.wait_status(namespace, small, lambda s: s.get("phase") == "Running"
                             and s.get("nodes") == 4, f"{small} grown to 4", timeout=300)  # fmt: skip
    asked = _growth(kind, namespace, small) or {}
    assert admitted(asked) == 4, asked.get("status")
    first = workload(kind, namespace, small)
    assert _condition(first.get("status") or {}, "Finished", "True"), "first admission kept"
    assert not grown.get("failures"), grown["failures"]
    assert grown["restarts"]["total"] == 0, grown["restarts"]
    reasons = [e.reason for e in kind.events(namespace, small)]
    assert reasons.count("Grow") == 1, reasons
    growth_admitted = condition_time(asked, "QuotaReserved")
    early = [p for p, t in scheduled_pods(kind, namespace, small).items()
             if t < growth_admitted - 1]  # fmt: skip
    assert len(early) == 2, f"pods placed beyond the first admission of 2: {sorted(early)}"
    losses = log_of(kind, namespace, small) / "losses.jsonl"
    trained = wait_for(partial(first_step_after, losses, before["epoch"]), 120,
                       f"{small}'s first step at 4 nodes")  # fmt: skip
    record("kueue-grow-admitted", job=small, admitted_pods=4,
           freed_to_admitted_s=round(growth_admitted - freed_at, 1))  # fmt: skip
    record("kueue-grown", job=small, admitted_to_training_s=round(trained[1] - growth_admitted, 1),
           events=reasons, failures=[])  # fmt: skip


def _growth(kind: KindCluster, namespace: str, job: str) -> dict[str, Any] | None:
    """The Workload `job` asked for to grow (any but its first), if there is one."""
    found = kind.custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads", label_selector=f"phalanx.dev/job={job}"
    )["items"]
    return next((w for w in found if w["metadata"]["name"] != workload_name(job)), None)


def test_a_preempted_job_saves_stops_waits_and_resumes_with_nothing_redone(
    kueue: KindCluster, namespace: str, cluster_queue: str, tmp_path: Path
) -> None:
    kind = kueue
    quota(kind, namespace, pods=4)
    local_queue(kind, namespace)
    steps = 200
    low = queued_job("low", steps=steps, nodes=(2, 4), priority=LOW)
    kind.create_job(namespace, low)
    log = log_of(kind, namespace, "low")
    kind.wait_status(namespace, "low", lambda s: s.get("phase") == "Running"
                     and (s.get("lastCheckpoint") or {}).get("step", 0) >= 10,
                     "low training at 4 nodes past a checkpoint", timeout=300)  # fmt: skip
    kind.create_job(namespace, queued_job("high", steps=40, nodes=(4, 4), priority=HIGH))
    evicted = wait_for(lambda: _evicted(workload(kind, namespace, "low")), 120,
                       "Kueue to evict the low-priority job")  # fmt: skip
    stopped_at = wait_for(lambda: time.time() if not kind.node_pods(namespace, "low") else None,
                          120, "the low job's pods gone")  # fmt: skip
    waiting = kind.wait_status(namespace, "low", _suspended("EvictedByKueue"),
                               "low Suspended, evicted", timeout=60)  # fmt: skip
    assert not waiting.get("failures"), waiting["failures"]
    kind.wait_status(namespace, "high", lambda s: s.get("phase") == "Succeeded",
                     "high Succeeded", timeout=300)  # fmt: skip
    done = kind.wait_status(namespace, "low", lambda s: s.get("phase") == "Succeeded",
                            "low resumed and Succeeded", timeout=600)  # fmt: skip
    assert done["restarts"]["total"] == 0, done["restarts"]
    assert not done.get("failures"), done["failures"]
    reasons = [e.reason for e in kind.events(namespace, "low")]
    assert reasons.count("Evicted") == 1, reasons

    records = steps_in(log)
    evicted_epoch = max(r["epoch"] for r in records if "loss" in r and r["time"] < stopped_at)
    trained, resumed = trained_and_resumed(records, evicted_epoch)
    assert resumed == trained, f"trained to {trained}, resumed from {resumed}"
    samples = [r for path in sorted(log.glob("samples-*.jsonl"))
               for r in steps_in_file(path)]  # fmt: skip
    losses, by_step = trajectory(records, samples)
    assert sorted(losses) == list(range(1, steps + 1))
    check_exactly_once(by_step, DATASET, GLOBAL_BATCH, steps)
    reference = reference_losses(low, steps, tmp_path / "reference")
    worst = max(abs(reference[s] - losses[s]) for s in reference)
    assert worst <= 1e-4, f"largest loss difference {worst:.2e} from the uninterrupted run"
    readmitted = first_step_after(log / "losses.jsonl", evicted_epoch)
    assert readmitted is not None
    record("kueue-preempted", evicted_reason=evicted[0], steps_redone=trained - resumed,
           eviction_to_stopped_s=round(stopped_at - evicted[1], 1),
           resumed_from_step=resumed, worst_loss_difference=worst, failures=[],
           events=reasons)  # fmt: skip


def test_a_queued_jobs_replacement_pod_schedules_past_epoch_one_without_an_eviction(
    kueue: KindCluster, namespace: str, cluster_queue: str
) -> None:
    """Kueue's all-or-nothing admission (waitForPodsReady) is the gang here: a deleted pod's
    replacement must schedule and run beside its carried-over peers, or Kueue evicts the job."""
    kind = kueue
    quota(kind, namespace, pods=3)
    local_queue(kind, namespace)
    kind.create_job(namespace, queued_job("gang", steps=250, nodes=(3, 3)))
    replaced = replace_a_pod(kind, namespace, "gang")
    placed = scheduled_pods(kind, namespace, "gang")
    assert len(placed) == 4, f"three pods, then one replacement scheduled: {sorted(placed)}"
    found = workload(kind, namespace, "gang")
    assert admitted(found) == 3, found.get("status")
    ready = _condition(found["status"], "PodsReady", "True")
    assert ready is not None, found["status"]
    assert ready["reason"] == "Recovered", "PodsReady went False and back after the start"
    reasons = [e.reason for e in kind.events(namespace, "gang")]
    assert "Evicted" not in reasons, reasons
    record("kueue-pod-replaced",
           fault_to_first_step_s=round(replaced.first_step - replaced.deleted_at, 1),
           failures=[f["reason"] for f in replaced.status.get("failures", [])],
           trained_epoch=replaced.epoch, events=reasons)  # fmt: skip


def test_a_queue_name_kueue_refuses_is_a_configuration_error_naming_the_field(
    kueue: KindCluster, namespace: str
) -> None:
    """A label value Kubernetes takes but Kueue's Workload does not (no DNS name): the job
    says why in the API server's words, and no pod is made."""
    kind = kueue
    job = queued_job("misnamed", steps=50, nodes=(2, 2))
    job["metadata"]["labels"] = {KUEUE_QUEUE: "Team_A"}
    kind.create_job(namespace, job)

    def refused(status: dict[str, Any]) -> bool:
        return any(c["type"] == "ConfigurationError" and c["status"] == "True"
                   and c.get("reason") == "RefusedByAPIServer" for c in status.get("conditions", []))  # fmt: skip

    status = kind.wait_status(namespace, "misnamed", refused, "ConfigurationError", timeout=120)
    [error] = [c for c in status["conditions"] if c["type"] == "ConfigurationError"]
    assert "queueName" in error["message"], error["message"]
    assert status["phase"] == "Suspended"
    assert kind.node_pods(namespace, "misnamed") == []


def steps_in_file(path: Path) -> list[dict[str, Any]]:
    return [r for r in map(_json, path.read_text().splitlines()) if r is not None]


def _json(line: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(line)
    except json.JSONDecodeError:  # a worker stopped mid-line
        return None
    return found


def _suspended(reason: str) -> Any:
    def check(status: dict[str, Any]) -> bool:
        return status.get("phase") == "Suspended" and any(
            c["type"] == "Suspended" and c["status"] == "True" and c.get("reason") == reason
            for c in status.get("conditions", [])
        )

    return check


def _evicted(found: dict[str, Any]) -> tuple[str, float] | None:
    condition = _condition(found.get("status") or {}, "Evicted", "True")
    if condition is None:
        return None
    return str(condition.get("reason")), api_seconds(condition["lastTransitionTime"])


def _condition(status: dict[str, Any], kind: str, value: str) -> dict[str, Any] | None:
    return next(
        (c for c in status.get("conditions") or [] if c["type"] == kind and c["status"] == value),
        None,
    )


def _apply(kind: KindCluster, manifest: dict[str, Any]) -> None:
    kind.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                 stdin=yaml.safe_dump(manifest))  # fmt: skip
