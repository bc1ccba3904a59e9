"""A user's own image gets Phalanx's agent injected: tests/e2e/images/user-python.Dockerfile has
python3 and torch and nothing of Phalanx, and runs deploy/examples/train.py, a plain DDP script
that imports nothing from Phalanx. The suite's chart values turn injection on
(`operator.agentInjection.enabled`), as a user's would.

What the agent brings to that image is asserted on what it does: the node pods carry the
injected init container and say so (`phalanx.dev/agent: injected`); a worker SIGKILLed inside a
pod restarts the gang in place, every pod carried into the new epoch and none recreated, where
the same image run bare would have its pods recreated; and the kill counts as one failure, not
one per rank whose collective failed after it. The same image runs a PyTorch Lightning and a
Hugging Face Trainer script (deploy/examples), each with its one-line callback: the status
shows their steps and goodput, and a kill restarts them in place too. An image with no Python at
all cannot run the agent: the job runs its command bare and says so.
"""

from __future__ import annotations

import time

import pytest

from phalanx.models import labels
from tests.e2e.cluster import KindCluster, record, wait_for
from tests.e2e.faults import signal_workers
from tests.e2e.user_programs import (
    NO_PYTHON_IMAGE,
    USER_IMAGE,
    resumed_after,
    script_config_map,
    user_job,
)

STEPS = 150


def train_py_past_a_checkpoint(kind: KindCluster, namespace: str, job: str) -> int:
    """deploy/examples/train.py as `job` in the user image, past step 25 (a checkpoint at 20);
    the job's epoch then."""
    script_config_map(kind, namespace, "train.py")
    command = ["python3", "/script/train.py", "$(PHALANX_CHECKPOINT_DIR)", str(STEPS), "0.1"]
    kind.create_job(namespace, user_job(job, command))
    wait_for(lambda: any(r.get("step", 0) >= 25 for r in kind.step_log(namespace, job)), 300,
             "the script to pass step 25 (a checkpoint at 20)")  # fmt: skip
    return int(kind.status(namespace, job)["epoch"])


def test_a_users_image_gets_the_agent_and_a_killed_worker_restarts_in_place(
    kind: KindCluster, namespace: str
) -> None:
    job = "user-ddp"
    epoch = train_py_past_a_checkpoint(kind, namespace, job)
    pods = kind.node_pods(namespace, job, epoch)
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.annotations[labels.AGENT] == "injected", pod.metadata.annotations
        assert [c.name for c in pod.spec.init_containers] == ["phalanx-agent"]
    before = {p.metadata.name: p.metadata.uid for p in pods}

    victim = kind.running_pod(namespace, job, epoch, rank=1)
    fault_at = time.time()
    assert signal_workers(kind, victim, "SIGKILL", "train.py", python="python3")
    status = kind.wait_status(namespace, job, lambda s: s.get("epoch", 0) > epoch,
                              "a new epoch after the kill")  # fmt: skip
    resumed, first = resumed_after(kind, namespace, job, fault_at)

    status = kind.status(namespace, job)
    assert set(status["current"]["ranks"]) == set(before), "every pod carried over, in place"
    after = {p.metadata.name: p.metadata.uid for p in kind.node_pods(namespace, job)}
    assert after == before, "no pod deleted or created"
    failures = [f for f in status["failures"] if f["epoch"] == epoch]
    assert len(failures) == 1, failures
    assert (failures[0]["class"], failures[0]["reason"]) == ("infrastructure", "Killed"), failures

    done = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded",
                            420)  # fmt: skip
    assert max(r.get("step", 0) for r in kind.step_log(namespace, job)) == STEPS
    assert resumed["resumed"] >= 20
    record("user-image-worker-killed", image=USER_IMAGE, job="train.py (plain DDP), 3 pods x 1",
           fault="worker-killed", failures=[f["reason"] for f in failures],
           fault_to_first_step_s=round(first["time"] - fault_at, 2),
           resumed_from_step=resumed["resumed"], restarts=done["restarts"])  # fmt: skip


def test_an_image_without_python_runs_bare_and_the_job_says_what_it_loses(
    kind: KindCluster, namespace: str
) -> None:
    """tests/e2e/images/no-python.Dockerfile: the injected agent cannot start there. The job
    must neither fail nor loop: a Warning event and the AgentInjected condition name what is
    lost, and the command runs without the agent, charged no restart."""
    job = "no-python"
    command = ["sh", "-c", 'echo "rank $RANK of $WORLD_SIZE"; sleep 2']
    kind.create_job(namespace, user_job(job, command, nodes=2, image=NO_PYTHON_IMAGE))
    done = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded",
                            300)  # fmt: skip
    [condition] = [c for c in done["conditions"] if c["type"] == "AgentInjected"]
    assert (condition["status"], condition["reason"]) == ("False", "AgentCannotRun"), condition
    assert "without in-place restarts, hot spares" in condition["message"]
    assert "python3" in condition["message"], "the runtime's own words say what was missing"
    warnings = [e for e in kind.events(namespace, job) if e.reason == "AgentNotInjected"]
    assert warnings
    assert warnings[0].type == "Warning"
    assert done["restarts"]["total"] == 0
    last = kind.node_pods(namespace, job, done["epoch"])
    assert last
    assert all(p.metadata.annotations[labels.AGENT] == "cannot-run" for p in last)


@pytest.mark.parametrize(
    ("framework", "script"),
    [("lightning", "lightning_train.py"), ("hugging-face", "hf_train.py")],
)
def test_a_framework_script_in_a_users_image_shows_its_progress_and_restarts_in_place(
    kind: KindCluster, namespace: str, framework: str, script: str
) -> None:
    """A Lightning DDP script and a Hugging Face Trainer script, each with the one-line callback
    (`--phalanx`), in the user image: the job's status shows their steps, loss, checkpoint and
    goodput, and a SIGKILLed worker restarts the gang in place, measured to the first step."""
    job = f"{framework}-job"
    script_config_map(kind, namespace, script)
    command = ["python3", f"/script/{script}", "$(PHALANX_CHECKPOINT_DIR)", str(STEPS), "0.1",
               "--phalanx"]  # fmt: skip
    kind.create_job(namespace, user_job(job, command))
    status = kind.wait_status(
        namespace, job,
        lambda s: (s.get("progress") or {}).get("step", 0) >= 25
        and (s.get("lastCheckpoint") or {}).get("step", 0) >= 20,
        "steps and a checkpoint reported through the framework's callback", 300,
    )  # fmt: skip
    epoch = status["epoch"]
    before = {p.metadata.name for p in kind.node_pods(namespace, job, epoch)}
    victim = kind.running_pod(namespace, job, epoch, rank=1)
    fault_at = time.time()
    assert signal_workers(kind, victim, "SIGKILL", script, python="python3")
    resumed, first = resumed_after(kind, namespace, job, fault_at)

    done = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded",
                            420)  # fmt: skip
    assert done["epoch"] == epoch + 1
    assert set(done["current"]["ranks"]) == before, "every pod carried over, in place"
    assert [(f["class"], f["reason"]) for f in done["failures"]] == [("infrastructure", "Killed")]
    assert done["progress"]["step"] == STEPS
    assert done["progress"]["loss"] is not None
    assert done["lastCheckpoint"]["step"] >= 20
    assert 0 < done["goodput"] < 1
    recovered = [e.message for e in kind.events(namespace, job) if e.reason == "Recovered"]
    assert recovered, "the recovery is measured to the first step"
    assert resumed["resumed"] >= 10, "resumed from the framework's own checkpoint"
    record(f"user-image-{framework}-worker-killed", image=USER_IMAGE,
           job=f"{script} --phalanx, 3 pods x 1", fault="worker-killed",
           failures=[f["reason"] for f in done["failures"]],
           fault_to_first_step_s=round(first["time"] - fault_at, 2),
           resumed_from_step=resumed["resumed"], recovered=recovered[-1])  # fmt: skip


def test_a_stopped_worker_in_a_users_image_is_a_hang_restarted_in_place(
    kind: KindCluster, namespace: str
) -> None:
    """train.py reports no steps, so no step can be seen not to advance: its agent finds the
    SIGSTOPped worker in the process table (10 s, the default), and the gang restarts in place."""
    job = "user-hang"
    epoch = train_py_past_a_checkpoint(kind, namespace, job)
    before = {p.metadata.name for p in kind.node_pods(namespace, job, epoch)}
    victim = kind.running_pod(namespace, job, epoch, rank=1)
    fault_at = time.time()
    assert signal_workers(kind, victim, "SIGSTOP", "train.py", python="python3")
    resumed, first = resumed_after(kind, namespace, job, fault_at)
    done = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded",
                            420)  # fmt: skip
    [failure] = [f for f in done["failures"] if f["epoch"] == epoch]
    assert (failure["class"], failure["reason"]) == ("infrastructure", "Hang"), failure
    assert "stayed stopped (SIGSTOP)" in failure["message"], "found by the agent, in place"
    assert set(done["current"]["ranks"]) == before
    record("user-image-rank-stopped", image=USER_IMAGE, job="train.py (plain DDP), 3 pods x 1",
           fault="rank-stopped", failures=[failure["reason"]],
           fault_to_first_step_s=round(first["time"] - fault_at, 2),
           resumed_from_step=resumed["resumed"])  # fmt: skip
