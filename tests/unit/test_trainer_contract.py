"""The trainer reads the env contract by the names `phalanx.models.env` defines.

Covers: pod variables (plain or torchrun's PET_ spelling); per-worker ranks form 0..world-1;
a missing or inconsistent variable is refused naming the variable.
"""

from __future__ import annotations

import pytest

from phalanx.models import env
from phalanx.pod import EnvError, PodEnv

POD = {
    env.MASTER_ADDR: "job-0-0.job.ns.svc",
    env.MASTER_PORT: "29500",
    env.NNODES: "3",
    env.NODE_RANK: "0",
    env.NPROC_PER_NODE: "2",
}


def pod_env(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> PodEnv:
    for name in [*POD, *(env.TORCHRUN_PREFIX + n for n in POD)]:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return PodEnv.read()


def test_worker_ranks_cover_the_world_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ranks = []
    for node_rank in range(3):
        pod = pod_env(monkeypatch, {**POD, env.NODE_RANK: str(node_rank)})
        ranks += [int(pod.worker_env(local)[env.RANK]) for local in range(2)]
        assert pod.worker_env(1)[env.WORLD_SIZE] == "6"
    assert sorted(ranks) == list(range(6))


def test_torchrun_spelling_is_read_too(monkeypatch: pytest.MonkeyPatch) -> None:
    pod = pod_env(monkeypatch, {env.TORCHRUN_PREFIX + k: v for k, v in POD.items()})
    assert (pod.nnodes, pod.nproc_per_node, pod.world_size) == (3, 2, 6)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({k: v for k, v in POD.items() if k != env.NNODES}, env.NNODES),
        ({**POD, env.NODE_RANK: "3"}, env.NODE_RANK),
        ({**POD, env.PHALANX_TENSOR_PARALLEL: "4"}, env.PHALANX_TENSOR_PARALLEL),
        ({**POD, env.MASTER_PORT: "http"}, env.MASTER_PORT),
    ],
    ids=["missing", "rank-out-of-range", "indivisible-tensor", "port-not-a-number"],
)
def test_bad_env_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, str], named: str
) -> None:
    with pytest.raises(EnvError, match=named):
        pod_env(monkeypatch, values)
