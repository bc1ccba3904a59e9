"""Both sides of the env contract agree: a node pod rendered by the operator's builder is parsed
by the trainer's settings model, and every variable the builder sets is a reserved name (so a
user cannot collide with it), for every rank of an epoch. A pod that is its only worker
(nprocPerNode 1) carries the worker's ranks too, and they follow an in-place restart.
"""

from __future__ import annotations

import os

import pytest

from harness.jobs import job_model
from phalanx.agent.epoch_env import epoch_env
from phalanx.agent.wire import Assignment
from phalanx.models import TrainingJob, env
from phalanx.operator.builder import BuildSettings, env_config_map, node_pod
from phalanx.operator.builder.env import pod_env
from phalanx.pod import PodEnv
from phalanx.resume.settings import CheckpointSettings
from phalanx.trainer.config import TrainerConfig
from tests.support import container_env


def _job() -> TrainingJob:
    return job_model(
        "llm",
        namespace="team",
        metadata={"uid": "u-1"},
        nprocPerNode=4,
        parallelism={"tensor": 2},
        checkpoint={"dir": None, "url": "s3://bucket/llm", "intervalSteps": 25},
        trainer={"globalBatchSize": 64, "sharding": "fsdp", "mixedPrecision": "bf16"},
        container={"env": [{"name": "HF_HOME", "value": "/cache"}]},
    )


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_trainer_parses_the_pod_the_operator_renders(
    monkeypatch: pytest.MonkeyPatch, rank: int
) -> None:
    job = _job()
    variables = container_env.built(job, node_pod(job, 5, rank, 3, BuildSettings()))
    assert variables[env.PHALANX_POD_NAME] == f"llm-5-{rank}"
    assert variables[env.PHALANX_ASSIGNMENT_LEASE] == "llm-assignment"
    for name in [n for n in os.environ if env.is_reserved(n)]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    parsed = PodEnv.read()
    assert (parsed.nnodes, parsed.node_rank, parsed.nproc_per_node) == (3, rank, 4)
    assert parsed.master_addr == "llm-5-0.llm.team.svc.cluster.local"
    assert (parsed.job, parsed.namespace, parsed.epoch) == ("llm", "team", 5)
    assert (parsed.tensor_parallel, parsed.data_parallel) == (2, 6)
    assert parsed.checkpoint_url == "s3://bucket/llm"
    assert parsed.heartbeat_lease == "llm-heartbeat"
    trainer = TrainerConfig()
    assert (trainer.global_batch_size, trainer.sharding, trainer.mixed_precision) == (
        64,
        "fsdp",
        "bf16",
    )
    assert CheckpointSettings.from_env().interval_steps == 25
    ranks = [int(parsed.worker_env(local)[env.RANK]) for local in range(4)]
    assert ranks == [rank * 4 + local for local in range(4)]


def test_every_variable_the_operator_sets_is_reserved() -> None:
    """On the pod and in the job's env ConfigMap."""
    pod = node_pod(_job(), epoch=1, rank=0, nodes=2, settings=BuildSettings())
    names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
    common = list(env_config_map(_job(), BuildSettings())["data"])
    ours = [n for n in [*names, *common] if not n.startswith("NCCL_") and n != "HF_HOME"]
    assert ours
    assert all(env.is_reserved(n) for n in ours), [n for n in ours if not env.is_reserved(n)]
    assert names[-1] == "HF_HOME"  # the user's own env is kept, after the contract


def _one_process_per_pod(nproc: int = 1) -> TrainingJob:
    job = _job()
    spec = job.spec.model_copy(
        update={"nproc_per_node": nproc, "parallelism": job.spec.parallelism.model_copy(
            update={"tensor": 1})}
    )  # fmt: skip
    return job.model_copy(update={"spec": spec})


@pytest.mark.parametrize("rank", [0, 2])
def test_a_pod_that_is_its_only_worker_gets_the_pytorchjob_ranks(rank: int) -> None:
    """nprocPerNode 1: `python train.py` as the container's command finds RANK, WORLD_SIZE,
    LOCAL_RANK and LOCAL_WORLD_SIZE, as PyTorchJob sets them; the same as the agent would give
    its one worker."""
    job = _one_process_per_pod()
    variables = pod_env(job, 4, rank, 3, BuildSettings())
    expected = {env.RANK: str(rank), env.WORLD_SIZE: "3", env.LOCAL_RANK: "0",
                env.LOCAL_WORLD_SIZE: "1"}  # fmt: skip
    assert {name: variables.get(name) for name in expected} == expected
    worker = PodEnv.read(variables).worker_env(0)
    assert {name: worker[name] for name in expected} == expected


def test_with_several_processes_per_pod_the_launcher_sets_the_ranks() -> None:
    """A value on the pod would be wrong for every worker but one."""
    variables = pod_env(_one_process_per_pod(nproc=2), 1, 1, 2, BuildSettings())
    assert not {env.RANK, env.WORLD_SIZE, env.LOCAL_RANK, env.LOCAL_WORLD_SIZE} & set(variables)


def test_an_in_place_restart_gives_a_carried_over_pod_its_new_ranks() -> None:
    """The agent re-ranks a pod carried into a new epoch: RANK and WORLD_SIZE on a pod that is
    its only worker follow the assignment, with the rendezvous and torchrun's PET_* spelling."""
    base = pod_env(_one_process_per_pod(), 1, 2, 3, BuildSettings())
    assignment = Assignment(
        epoch=2, nodes=2, master_addr="10.0.0.7", master_port=4321, ranks={"llm-1-2": 0}
    )
    merged = epoch_env(base, assignment, node_rank=0)
    assert (merged[env.RANK], merged[env.WORLD_SIZE]) == ("0", "2")
    assert (merged[env.NODE_RANK], merged[env.NNODES], merged[env.PHALANX_EPOCH]) == ("0", "2", "2")
    assert merged[env.TORCHRUN_PREFIX + env.NODE_RANK] == "0"
    several = epoch_env(pod_env(_one_process_per_pod(2), 1, 1, 2, BuildSettings()), assignment, 0)
    assert env.RANK not in several, "with a launcher per pod, the workers get theirs from it"
