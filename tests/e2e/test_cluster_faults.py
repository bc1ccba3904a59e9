"""Faults of the cluster around a job, on real pods: each asserts the path it is named for.

- The operator's pod killed mid-training: training goes on, the new operator takes the job over
  from its status, no restart, no new epoch.
- The kube-apiserver restarted mid-training (its container stopped; the kubelet starts it again):
  the agents' renewals and the operator's watches ride it out, no restart.
- A corrupt and a partial checkpoint newer than every real one on the shared volume: the resume
  after a worker kill skips both (each named in the trainer's log) and loads the newest valid one.
- A program that fails every time (exit 1): each failure is an application failure, and when the
  budget (`failurePolicy.maxRestarts`) is spent the job is Failed with RestartBudgetExhausted.
- A worker past its memory limit: the kernel's OOM killer picks it, and the agent, alive, tells
  the OOM kill from any other SIGKILL by its cgroup's count (OOMKilled, infrastructure).
- The checkpoint volume full: the save that does not fit fails, the job says so
  (CheckpointFailing, a CheckpointFailed event) and trains on without a restart, its last
  committed checkpoint kept.
- A slow rank (its pod's CPU quota cut to a tenth of a CPU, as on a throttled machine):
  found by its compute time as a Straggler, and the job restarts once, at once, without that
  node.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import faults
from tests.e2e.cluster import (
    KindCluster,
    api_seconds,
    first_step_after,
    for_kind,
    record,
    run,
    wait_for,
)
from tests.e2e.jobs import training_job
from tests.e2e.user_programs import script_config_map, user_job

JOB = "steady"
CONTROL_PLANE_NODE = "phalanx-e2e-control-plane"


CPU_BOUND = ["--step-delay-seconds", "0", "--dim", "256", "--hidden", "1024", "--layers", "4",
             "--seq-len", "64"]  # fmt: skip
"""Trainer arguments for steps of real compute (a model of about 3 M parameters, no emulated
delay): work a CPU quota slows, where a sleep would not be."""


def _training(
    kind: KindCluster, namespace: str, steps: int = 250, args: list[str] | None = None
) -> dict[str, Any]:
    job = training_job(JOB, steps=steps)
    job["spec"]["template"]["spec"]["containers"][0]["args"] += args or []
    kind.create_job(namespace, for_kind(job))
    log = kind.shared_dir(namespace) / JOB / "log" / "losses.jsonl"
    return kind.wait_status(
        namespace, JOB,
        lambda s: s.get("phase") == "Running"
        and (s.get("lastCheckpoint") or {}).get("step", 0) >= 10
        and (first_step_after(log, s.get("epoch", 1) - 1) or (0,))[0] == s.get("epoch"),
        "training past a checkpoint", timeout=300,
    )  # fmt: skip


def _succeeds_without_a_restart(kind: KindCluster, namespace: str, epoch: int) -> None:
    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    reasons = [e.reason for e in kind.events(namespace, JOB)]
    assert "Restart" not in reasons, reasons
    assert done["epoch"] == epoch, done
    assert done["restarts"]["total"] == 0, done


def _step_log(kind: KindCluster, namespace: str) -> Path:
    return kind.shared_dir(namespace) / JOB / "log" / "losses.jsonl"


def _first_step_since(log: Path, since: float) -> float | None:
    """The trainer's time of its first training step after `since` (seconds since the epoch)."""
    for line in log.read_text().splitlines() if log.exists() else []:
        entry = json.loads(line)
        if "loss" in entry and float(entry["time"]) > since:
            return float(entry["time"])
    return None


def _trained_through(kind: KindCluster, namespace: str, fault_at: float, case: str,
                     **figures: Any) -> None:  # fmt: skip
    """Record a fault the job rides out: no decision, and its first step after the fault (the
    step log shows training never stopped for a restart)."""
    first = _first_step_since(_step_log(kind, namespace), fault_at)
    assert first is not None, "no training step after the fault"
    reasons = [e.reason for e in kind.events(namespace, JOB)]
    record(case, fault_to_decision_s=None, fault_to_first_step_s=round(first - fault_at, 1),
           failures=[], events=reasons, **figures)  # fmt: skip


def test_the_operator_killed_mid_training_costs_no_restart(
    kind: KindCluster, phalanx: str, namespace: str
) -> None:
    epoch = _training(kind, namespace)["epoch"]
    operators = kind.core.list_namespaced_pod(
        phalanx, label_selector="app.kubernetes.io/component=operator"
    ).items
    assert operators
    fault_at = time.time()
    for pod in operators:
        kind.core.delete_namespaced_pod(pod.metadata.name, phalanx, grace_period_seconds=0)
    gone = {p.metadata.name for p in operators}

    def replaced() -> bool:
        pods = kind.core.list_namespaced_pod(
            phalanx, label_selector="app.kubernetes.io/component=operator"
        ).items
        return any(p.metadata.name not in gone and p.status.phase == "Running" for p in pods)

    wait_for(replaced, 180, "a new operator pod Running")
    operator_back_s = round(time.time() - fault_at, 1)
    _succeeds_without_a_restart(kind, namespace, epoch)
    _trained_through(kind, namespace, fault_at, "operator-killed", operator_back_s=operator_back_s)


def test_the_api_server_restarted_mid_training_costs_no_restart(
    kind: KindCluster, namespace: str
) -> None:
    epoch = _training(kind, namespace)["epoch"]

    def serving() -> bool:
        answer = kind.kubectl("get", "--raw", "/readyz", check=False, timeout=10)
        return answer.returncode == 0 and answer.stdout.strip() == "ok"

    # The kubelet stops a static pod whose manifest leaves its folder and starts it again when
    # the manifest is back: the API server restarted as an upgrade or a crash would.
    manifest, parked = "/etc/kubernetes/manifests/kube-apiserver.yaml", "/root/kube-apiserver.yaml"
    run(["docker", "exec", CONTROL_PLANE_NODE, "mv", manifest, parked])
    try:
        wait_for(lambda: not serving(), 120, "the kube-apiserver to stop", interval=1)
        down_at = time.time()
    finally:
        run(["docker", "exec", CONTROL_PLANE_NODE, "mv", parked, manifest])
    wait_for(serving, 180, "the kube-apiserver serving again", interval=1)
    outage = time.time() - down_at
    _succeeds_without_a_restart(kind, namespace, epoch)
    assert outage > 2, f"the API server was back in {outage:.1f} s: did it stop at all?"
    _trained_through(kind, namespace, down_at, "apiserver-restarted", outage_s=round(outage, 1))


def test_a_corrupt_and_a_partial_newest_checkpoint_are_skipped_on_resume(
    kind: KindCluster, namespace: str
) -> None:
    before = _training(kind, namespace)
    epoch = before["epoch"]
    folder = kind.shared_dir(namespace) / JOB
    partial, corrupt = folder / "step-900", folder / "step-800"
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"\0" * 4096)  # shards, and no .metadata yet
    corrupt.mkdir()
    (corrupt / ".metadata").write_bytes(b"not a DCP metadata file")
    victim = kind.running_pod(namespace, JOB, epoch, rank=0)
    fault_at = time.time()
    faults.kill_worker(kind, victim)
    log = folder / "log" / "losses.jsonl"
    _, first_step = wait_for(lambda: first_step_after(log, epoch), 300,
                             "a training step after the kill")  # fmt: skip
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    resumed = [r for r in records if r.get("event") == "resume"][-1]
    assert 10 <= resumed["from"] < 800, resumed
    logs = kind.kubectl("logs", "-n", namespace, victim.metadata.name, "--all-containers").stdout
    assert "skipping /checkpoints/steady/step-900: no .metadata" in logs, logs[-3000:]
    assert "checkpoint /checkpoints/steady/step-800 is unreadable" in logs, logs[-3000:]
    done = kind.wait_status(namespace, JOB, lambda s: s.get("phase") == "Succeeded",
                            "Succeeded", timeout=600)  # fmt: skip
    assert done["lastCheckpoint"]["step"] < 800, done["lastCheckpoint"]
    failure = next(f for f in done["failures"] if f["epoch"] == epoch)
    decided_at = api_seconds(failure["time"])
    record("checkpoint-corrupt", fault_to_decision_s=round(decided_at - fault_at, 1),
           fault_to_first_step_s=round(first_step - fault_at, 1), resumed_from_step=resumed["from"],
           failures=[f["reason"] for f in done["failures"]],
           events=[e.reason for e in kind.events(namespace, JOB)])  # fmt: skip


def test_a_program_that_always_fails_spends_its_budget_and_the_job_fails(
    kind: KindCluster, namespace: str
) -> None:
    script_config_map(kind, namespace, "train.py")  # the user job's mounted scripts (unused)
    failing = user_job("always-fails", ["python3", "-c", "import sys; sys.exit(1)"], nodes=2)
    failing["spec"]["failurePolicy"] = {"maxRestarts": 2, "backoff": {"initialSeconds": 1}}
    kind.create_job(namespace, failing)
    done = kind.wait_status(namespace, "always-fails", lambda s: s.get("phase") == "Failed",
                            "Failed", timeout=300)  # fmt: skip
    failed = next(c for c in done["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "RestartBudgetExhausted", failed
    assert failed["message"].startswith("maxRestarts (2) exhausted"), failed
    assert {f["class"] for f in done["failures"]} == {"application"}, done["failures"]
    assert done["restarts"]["application"] == 2, done["restarts"]
    assert len(done["failures"]) == 3, "one failure per epoch: two restarts, then the third fails"
    failed_at = api_seconds(failed["lastTransitionTime"])
    record("budget-exhausted",
           fault_to_decision_s=round(failed_at - api_seconds(done["failures"][-1]["time"]), 1),
           first_fault_to_failed_s=round(failed_at - api_seconds(done["failures"][0]["time"]), 1),
           failures=[f["reason"] for f in done["failures"]],
           events=[e.reason for e in kind.events(namespace, "always-fails")])  # fmt: skip


OOM_ONCE = """
import os, time
print("started", time.time(), flush=True)
time.sleep(5)
marker = "/tmp/oom-once"
if os.environ.get("RANK") == "1" and not os.path.exists(marker):
    open(marker, "w").close()
    print("allocating", time.time(), flush=True)
    hog = bytearray(1 << 30)  # 1 GiB, zero-filled: every page touched, past the 256 MiB limit
time.sleep(5)
"""


def _printed(logs: str, word: str) -> list[float]:
    return [float(line.split()[1]) for line in logs.splitlines() if line.startswith(word + " ")]


def test_a_worker_over_its_memory_limit_is_found_as_oom_killed(
    kind: KindCluster, namespace: str
) -> None:
    """The kernel's OOM killer picks the worker, not the agent (PID 1), so the container lives
    on and Kubernetes never says OOMKilled: the agent reads its cgroup's OOM kill count."""
    script_config_map(kind, namespace, "train.py")  # the user job's mounted scripts (unused)
    job = user_job("oom-once", ["python3", "-c", OOM_ONCE], nodes=2)
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "256Mi"}, "requests": {"memory": "256Mi"}}  # fmt: skip
    kind.create_job(namespace, job)
    done = kind.wait_status(namespace, "oom-once", lambda s: s.get("phase") == "Succeeded",
                            "Succeeded after one OOM kill", timeout=300)  # fmt: skip
    assert [(f["class"], f["reason"]) for f in done["failures"]] == [
        ("infrastructure", "OOMKilled")
    ], done["failures"]
    assert "killed by the kernel's OOM killer" in done["failures"][0].get("message", "")
    assert done["restarts"]["total"] == 1, done["restarts"]
    # The OOM-killed pod: its first worker printed when it allocated, the restarted one when it
    # began (the agent restarts workers in place: one container's log holds both).
    oom = done["failures"][0]
    logs = kind.kubectl("logs", "-n", namespace, oom["pod"]).stdout
    [fault_at], started = _printed(logs, "allocating"), _printed(logs, "started")
    again = [t for t in started if t > fault_at]
    record("oom-killed", fault_to_decision_s=round(api_seconds(oom["time"]) - fault_at, 1),
           fault_to_first_step_s=round(again[0] - fault_at, 1) if again else None,
           failures=[f["reason"] for f in done["failures"]],
           events=[e.reason for e in kind.events(namespace, "oom-once")])  # fmt: skip


def test_a_full_checkpoint_volume_is_reported_and_training_goes_on(
    kind: KindCluster, namespace: str
) -> None:
    """The job's checkpoints go to a 1.5 MiB volume (a memory-backed emptyDir, whose tmpfs is
    its sizeLimit): the first (about 0.9 MiB) fits, the second does not. Found as a failed save
    the trainer reports, not as a worker failure: no restart, training goes on."""
    job = training_job(JOB, steps=2000, nodes=(1, 1))
    spec = job["spec"]
    spec["checkpoint"]["dir"] = f"/small/{JOB}"
    pod = spec["template"]["spec"]
    pod["volumes"] = [{"name": "small", "emptyDir": {"medium": "Memory", "sizeLimit": "1536Ki"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "small", "mountPath": "/small"}]
    kind.create_job(namespace, for_kind(job))

    def failing(status: dict[str, Any]) -> bool:
        found = [c for c in status.get("conditions", []) if c["type"] == "CheckpointFailing"]
        return bool(found) and found[0]["status"] == "True"

    status = kind.wait_status(namespace, JOB, failing, "CheckpointFailing", timeout=300)
    [condition] = [c for c in status["conditions"] if c["type"] == "CheckpointFailing"]
    assert condition["reason"] == "SaveFailed", condition
    assert "saving step" in condition["message"], condition
    assert "resume from: step 10" in condition["message"], condition
    failed_at = status["progress"]["step"]
    later = kind.wait_status(namespace, JOB,
                             lambda s: s.get("progress", {}).get("step", 0) >= failed_at + 30,
                             "training on past the failed save", timeout=300)  # fmt: skip
    assert later["restarts"]["total"] == 0, later["restarts"]
    assert later["epoch"] == status["epoch"], "no restart"
    assert later["lastCheckpoint"]["step"] == 10, "the last committed checkpoint stays"
    reasons = [e.reason for e in kind.events(namespace, JOB)]
    assert "CheckpointFailed" in reasons
    # The fault: the step whose save did not fit (the trainer logs each step's time).
    failed_step = int(condition["message"].split("saving step ")[1].split()[0].rstrip(":"))
    steps = [json.loads(line) for line in _step_log(kind, namespace).read_text().splitlines()]
    fault_at = next(float(e["time"]) for e in steps if e.get("step") == failed_step and "loss" in e)
    first = _first_step_since(_step_log(kind, namespace), fault_at)
    record("volume-full",
           fault_to_decision_s=round(api_seconds(condition["lastTransitionTime"]) - fault_at, 1),
           fault_to_first_step_s=first and round(first - fault_at, 1), failures=[],
           found_as="CheckpointFailing", events=reasons)  # fmt: skip


@pytest.mark.timeout(1200)
def test_a_cpu_throttled_rank_is_found_as_a_straggler_and_the_job_leaves_its_node(
    kind: KindCluster, namespace: str
) -> None:
    """Node rank 2's pod gets a tenth of a CPU (its cgroup's CFS quota, as a CPU limit sets it;
    `faults.throttle_pod`): its rank's own work takes several times as long, which its compute
    time shows while the step times of the synchronous gang stay alike. Found as a Straggler (not a Hang: steps go on): the job restarts once,
    avoiding that node, and goes on at 2 nodes at once."""
    status = _training(kind, namespace, steps=2000, args=CPU_BOUND)
    epoch = status["epoch"]
    victim = kind.running_pod(namespace, JOB, epoch, rank=2)
    node = str(victim.spec.node_name)
    fault_at = time.time()
    faults.throttle_pod(victim, cpus=0.1)
    try:
        done = kind.wait_status(namespace, JOB, lambda s: s.get("epoch", 0) > epoch,
                                "a new epoch without the slow node", timeout=300)  # fmt: skip
    finally:
        faults.release_stalls()
    [failure] = [f for f in done["failures"] if f["epoch"] == epoch]
    assert (failure["reason"], failure.get("pod")) == ("Straggler", victim.metadata.name), failure
    events = kind.events(namespace, JOB)
    [straggler] = [str(e.message) for e in events if e.reason == "Straggler"]
    assert f"avoiding nodes ['{node}']" in straggler, straggler
    # The restart goes at once to the two pods on other nodes (no wait for a third node that
    # is not there: the avoided node held the third GPUs); a standby kept off it waits.
    assert done["nodes"] == 2, done
    after = kind.wait_status(namespace, JOB,
                             lambda s: s.get("phase") == "Running"
                             and s.get("progress", {}).get("epoch") == s.get("epoch"),
                             "training again at 2 nodes, without the slow one", timeout=300)  # fmt: skip
    assert (after["nodes"], after.get("avoidNodes")) == (2, [node]), after
    assert after["restarts"]["total"] == 1, after["restarts"]
    reasons = [e.reason for e in kind.events(namespace, JOB)]
    assert (reasons.count("Straggler"), reasons.count("Restart")) == (1, 1), reasons
    first = first_step_after(_step_log(kind, namespace), epoch)
    record("slow-rank", fault_to_decision_s=round(api_seconds(failure["time"]) - fault_at, 1),
           fault_to_first_step_s=first and round(first[1] - fault_at, 1),
           failures=[failure["reason"]], events=reasons)  # fmt: skip
