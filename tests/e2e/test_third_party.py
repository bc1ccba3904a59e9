"""Unmodified third-party programs in a user's own image, each through the faults a cluster
has: a PyTorch Lightning DDP script, a Hugging Face `Trainer` script (a small model built from
a config, no download), a torchrun elastic script (PyTorch's fault-tolerance tutorial's
snapshot pattern, launched with torchrun's elastic flags) and a DeepSpeed ZeRO-2 script (on
CPU over gloo, DeepSpeed's own checkpoints). None imports Phalanx or
reports progress (the callbacks' runs are in test_any_image.py); the image is
tests/e2e/images/user-python.Dockerfile, python3 and torch and nothing of Phalanx, and the
operator injects the agent.

For each program, on 3 pods of one process:

- a worker SIGKILLed: the gang restarts in place (no pod recreated), one failure;
- a rank SIGSTOPped: its agent finds it stopped in the process table (10 s, the default, since
  the program reports no step that could be seen not to advance), a Hang, restarted in place;
- a node lost with `spares: 1` (2 pods and a hot spare): the spare takes the lost rank, so the
  job keeps its size.

Each resumes from the program's own checkpoint and succeeds; the figure is the time from the
fault to the program's first step after its resume, from its own step log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from phalanx.models.names import standby_pod_name
from tests.e2e import faults
from tests.e2e.cluster import KindCluster, record, wait_for
from tests.e2e.faults import signal_workers
from tests.e2e.user_programs import USER_IMAGE, resumed_after, script_config_map, user_job

STEPS = 150
CHECKPOINT = "$(PHALANX_CHECKPOINT_DIR)"
PROGRAMS: dict[str, tuple[str, list[str], int]] = {
    "lightning": (
        "lightning_train.py",
        ["python3", "/script/lightning_train.py", CHECKPOINT, str(STEPS), "0.1"],
        10,
    ),
    "hugging-face": (
        "hf_train.py", ["python3", "/script/hf_train.py", CHECKPOINT, str(STEPS), "0.1"], 10
    ),
    "torchrun-elastic": (
        "elastic_train.py",
        ["torchrun", "--nnodes=2:3", "--nproc-per-node=1", "--max-restarts=3",
         "--rdzv-backend=c10d", "--rdzv-endpoint=$(MASTER_ADDR):29400",
         "/script/elastic_train.py", CHECKPOINT, str(STEPS), "0.1"],
        5,
    ),
    "deepspeed": (
        "deepspeed_train.py",
        ["python3", "/script/deepspeed_train.py", CHECKPOINT, str(STEPS), "0.1"],
        10,
    ),
}  # fmt: skip
"""Program -> (its script in deploy/examples, the container's command, its checkpoint cadence)."""


def _start(kind: KindCluster, namespace: str, program: str, **shape: Any) -> tuple[str, int]:
    """`program` as a job in the user image, past its second checkpoint; the job and its epoch."""
    script, command, every = PROGRAMS[program]
    job = f"{program}-third-party"
    script_config_map(kind, namespace, script)
    kind.create_job(namespace, user_job(job, command, **shape))
    wait_for(lambda: any(r.get("step", 0) >= 2 * every + 5 for r in kind.step_log(namespace, job)),
             300, f"{program} past step {2 * every + 5}")  # fmt: skip
    return job, int(kind.status(namespace, job)["epoch"])


def _finish(
    kind: KindCluster,
    namespace: str,
    job: str,
    program: str,
    fault: str,
    fault_at: float,
    at_resume: Callable[[dict[str, Any]], None] = lambda _: None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The program's resume after the fault, measured; `at_resume` checks the job's status then;
    the job's status once it succeeded."""
    resumed, first = resumed_after(kind, namespace, job, fault_at)
    at_resume(kind.status(namespace, job))
    done = kind.wait_status(namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded",
                            420)  # fmt: skip
    assert max(r.get("step", 0) for r in kind.step_log(namespace, job)) == STEPS
    assert resumed["resumed"] >= PROGRAMS[program][2], "from the program's own checkpoint"
    record(f"user-image-{program}-{fault}", image=USER_IMAGE, fault=fault,
           job=f"{PROGRAMS[program][0]} (unmodified), {resumed['world']} pods x 1",
           fault_to_first_step_s=round(first["time"] - fault_at, 2),
           resumed_from_step=resumed["resumed"],
           failures=[f["reason"] for f in done["failures"]])  # fmt: skip
    return resumed, done


def _in_place(
    kind: KindCluster, namespace: str, program: str, signal: str, fault: str
) -> dict[str, Any]:
    """`signal` to one worker of a 3-pod job running `program`: the gang restarts in place, every
    pod carried over, for one failure; the failure."""
    job, epoch = _start(kind, namespace, program)
    before = {p.metadata.name for p in kind.node_pods(namespace, job, epoch)}
    assert len(before) == 3
    victim = kind.running_pod(namespace, job, epoch, rank=1)
    fault_at = time.time()
    assert signal_workers(kind, victim, signal, PROGRAMS[program][0], python="python3")
    _, done = _finish(kind, namespace, job, program, fault, fault_at)
    assert set(done["current"]["ranks"]) == before, "every pod carried over, in place"
    assert done["epoch"] == epoch + 1
    [failure] = [f for f in done["failures"] if f["epoch"] == epoch]
    assert failure["class"] == "infrastructure", failure
    return dict(failure)


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_killed_worker_of_a_third_party_program_restarts_in_place(
    kind: KindCluster, namespace: str, program: str
) -> None:
    failure = _in_place(kind, namespace, program, "SIGKILL", "worker-killed")
    assert failure["reason"] == "Killed", failure


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_stopped_rank_of_a_third_party_program_is_a_hang_restarted_in_place(
    kind: KindCluster, namespace: str, program: str
) -> None:
    failure = _in_place(kind, namespace, program, "SIGSTOP", "rank-stopped")
    assert failure["reason"] == "Hang", failure
    assert "stayed stopped (SIGSTOP)" in failure["message"], "found by its agent, in place"


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_hot_spare_takes_the_lost_rank_of_a_third_party_program(
    kind: KindCluster, namespace: str, program: str
) -> None:
    job, _ = _start(kind, namespace, program, nodes=2, min_nodes=2, spares=1)
    status = kind.wait_status(namespace, job, lambda s: s.get("spares") == 1,
                              "a hot spare standing by", 300)  # fmt: skip
    epoch = status["epoch"]
    victim = kind.running_pod(namespace, job, epoch, rank=1)
    spare = standby_pod_name(job, epoch, 0)

    def the_spare_took_rank_1(now: dict[str, Any]) -> None:
        assert now["current"]["ranks"].get(spare) == 1, f"the spare took rank 1: {now['current']}"

    fault_at = time.time()
    try:
        faults.lose_node(kind, victim)
        resumed, done = _finish(kind, namespace, job, program, "node-lost-spare", fault_at,
                                the_spare_took_rank_1)  # fmt: skip
    finally:
        kind.start_node(victim.spec.node_name)
    assert resumed["world"] == 2, f"the spare kept the job at 2 nodes: {resumed}"
    lost = [(f["class"], f["reason"], f["pod"]) for f in done["failures"]]
    assert lost == [("infrastructure", "PeerSilent", victim.metadata.name)], (
        "found by its peers as the pod that fell silent; the survivors' exits follow from it"
    )
    reasons = [e.reason for e in kind.events(namespace, job)]
    assert not {"Grow", "Shrink"} & set(reasons), reasons
    assert reasons.count("Restart") == 1, f"one restart for one lost node: {reasons}"
