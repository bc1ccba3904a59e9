"""What a local node pod runs: the container's command with `$(NAME)` expanded from the pod's
env as the kubelet does, the PyTorchJob ranks for a pod that is its only worker, and no command
at all for a standby of a job whose pods do not run the agent (it would train with a rank
nobody gave it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.jobs import job_manifest
from phalanx.local.cluster import LocalCluster
from phalanx.local.executor import LocalExecutor
from phalanx.local.launch import Workdir, expand, node_launch, runs_agent
from phalanx.models import TrainingJob, env
from phalanx.operator.planner import CreateStandbyPod, Plan
from tests.unit.planner.builders import T0


def _job(nproc: int = 1, **container: Any) -> TrainingJob:
    return TrainingJob.model_validate(
        job_manifest("s", replicas={"max": 3}, nprocPerNode=nproc, container=container)
    )


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)/x", "1/x"),
        ("$(A)$(B)", "12"),
        ("$(UNSET)", "$(UNSET)"),
        ("$$(A)", "$(A)"),
        ("$A", "$A"),
        ("cost: $$5", "cost: $5"),
    ],
)
def test_references_expand_as_the_kubelet_does(text: str, expanded: str) -> None:
    assert expand(text, {"A": "1", "B": "2"}) == expanded


def test_a_script_as_the_command_gets_its_ranks_and_the_runs_checkpoint_directory(
    tmp_path: Path,
) -> None:
    job = _job(command=["python", "train.py", "$(PHALANX_CHECKPOINT_DIR)", "$(RANK)"])
    assert not runs_agent(job)
    launch = node_launch(job, "s-1-1", 1, 1, 2, 4242, Workdir(tmp_path), "run", 0.5)
    checkpoints = str(tmp_path / "checkpoints")
    assert launch.argv == ("python", "train.py", checkpoints, "1")
    assert (launch.env[env.RANK], launch.env[env.WORLD_SIZE]) == ("1", "2")
    assert launch.env[env.MASTER_PORT] == "4242"


def test_only_args_means_the_agent() -> None:
    assert runs_agent(_job(args=["python", "train.py"]))
    assert runs_agent(_job())
    assert not runs_agent(_job(nproc=2, command=["torchrun", "train.py"]))


@pytest.mark.parametrize(
    ("container", "started"), [({}, True), ({"command": ["torchrun", "t.py"]}, False)]
)
def test_a_standby_runs_the_command_only_when_it_is_the_agent(
    tmp_path: Path, container: dict[str, Any], started: bool
) -> None:
    cluster = LocalCluster()
    executor = LocalExecutor(_job(nproc=2, **container), cluster, Workdir(tmp_path), "run", 0.5)
    executor.apply(Plan(actions=[CreateStandbyPod(1, 0)]), T0)
    [pod] = cluster.pods.values()
    assert (pod.launch is not None) == started
