"""torchrun's worker contract, key by key: the same elastic script run by real `torchrun` (two
launchers, one a node, static rendezvous) and by Phalanx (`phalanx run`, 2 node pods x
`nprocPerNode: 2`, the script as a `torchrun` command under the agent, as the operator's injected
agent runs it in a pod: the agent is the pods' launcher). Every variable torchrun gives its workers must reach Phalanx's workers too, with the
same value where the two must agree, in the first attempt and after a restart: every rank fails
in its first attempt, so torchrun's launchers restart their workers and Phalanx restarts its gang
in place, in its pods as they are.

Real processes on both sides; the script (tests/scripts/elastic_env.py) reads
TORCHELASTIC_RESTART_COUNT at its first line, as third-party elastic scripts do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.controlplane import free_port
from harness.jobs import job_manifest
from tests.support.local import ROOT, phalanx

SCRIPT = ROOT / "tests" / "scripts" / "elastic_env.py"
NODES, NPROC, MAX_RESTARTS = 2, 2, 3

DIFFER = {
    "MASTER_ADDR": "each launcher's own rendezvous address",
    "MASTER_PORT": "each launcher's own rendezvous port",
    "TORCHELASTIC_RUN_ID": "torchrun's --rdzv-id ('none' without one); the job's uid in Phalanx",
    "TORCHELASTIC_ERROR_FILE": "a path of each launcher's own",
    "TORCHELASTIC_USE_AGENT_STORE": "torchrun's agent hosts the store; Phalanx's rank 0 does",
    "TORCHELASTIC_SIGNALS_TO_HANDLE": "the signals each launcher passes on to its workers",
}
"""The variables whose values differ by design, and why; every other one must be equal."""


def environments(out: Path) -> dict[tuple[int, int], dict[str, str]]:
    """What each worker wrote: its environment by (restart count, rank)."""
    found = {}
    for path in out.glob("*.json"):
        restart, rank = path.stem.split("-")
        found[int(restart), int(rank)] = json.loads(path.read_text())
    return found


def run_torchrun(out: Path) -> dict[tuple[int, int], dict[str, str]]:
    """The script under two real torchrun launchers, one a node, on this machine."""
    port = str(free_port())

    def start(node: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NODES),
             "--nproc-per-node", str(NPROC), "--node-rank", str(node), "--master-addr",
             "127.0.0.1", "--master-port", port, "--max-restarts", str(MAX_RESTARTS),
             str(SCRIPT), str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    launchers = [start(node) for node in range(NODES)]
    for launcher in launchers:
        _, stderr = launcher.communicate(timeout=180)
        assert launcher.returncode == 0, stderr[-3000:]
    return environments(out)


def run_phalanx(
    tmp_path: Path, out: Path
) -> tuple[dict[str, Any], dict[tuple[int, int], dict[str, str]]]:
    """The script as a `torchrun` command of a TrainingJob on 2 node pods, under `phalanx run`."""
    command = ["phalanx-agent", "torchrun", str(SCRIPT), str(out)]
    job = job_manifest(
        "elastic-env",
        replicas={"min": NODES, "max": NODES},
        nprocPerNode=NPROC,
        failurePolicy={"maxRestarts": MAX_RESTARTS},
        checkpoint={"dir": str(tmp_path / "checkpoints")},
        container={"name": "train", "image": "any", "command": command},
    )
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    done = phalanx("run", str(manifest), "--workdir", str(tmp_path / "run"), "-o", "json",
                   timeout=240)  # fmt: skip
    assert done.code == 0, done.stderr[-4000:]
    return done.summary, environments(out)


def added_by_torchrun(worker: dict[str, str]) -> dict[str, str]:
    """What torchrun put in its worker's environment: all the worker has that the test's own
    environment (the launchers' parent's) does not, or has with another value."""
    return {k: v for k, v in worker.items() if os.environ.get(k) != v}


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_phalanx_workers_get_every_variable_torchrun_gives_its_workers(tmp_path: Path) -> None:
    (torchrun_out := tmp_path / "torchrun").mkdir()
    (phalanx_out := tmp_path / "phalanx").mkdir()
    torchrun = run_torchrun(torchrun_out)
    summary, ours = run_phalanx(tmp_path, phalanx_out)

    assert summary["phase"] == "Succeeded", summary["message"]
    assert summary["restarts"]["application"] == 1, summary["restarts"]
    world = NODES * NPROC
    assert {key for key in torchrun if key[0] == 1} == {(1, rank) for rank in range(world)}
    assert {key for key in ours if key[0] == 1} == {(1, rank) for rank in range(world)}
    first = sorted(set(torchrun) & set(ours) & {(0, rank) for rank in range(world)})
    assert first, "some rank of each wrote its first attempt's environment before the gang stopped"

    compared = 0
    for key in [*first, *((1, rank) for rank in range(world))]:
        theirs, mine = added_by_torchrun(torchrun[key]), ours[key]
        missing = sorted(set(theirs) - set(mine))
        assert not missing, f"attempt {key[0]}, rank {key[1]}: torchrun sets {missing}"
        unequal = {
            name: (value, mine[name])
            for name, value in theirs.items()
            if name not in DIFFER and mine[name] != value
        }
        assert not unequal, f"attempt {key[0]}, rank {key[1]} (torchrun's, ours): {unequal}"
        compared += len(theirs)
    assert compared >= 20 * (len(first) + world), "torchrun's whole contract was compared"

    for rank in range(world):  # the restart was in place: the same pods ran both attempts
        if (0, rank) in ours:
            assert ours[0, rank]["PHALANX_POD_NAME"] == ours[1, rank]["PHALANX_POD_NAME"]
        error_file = Path(ours[1, rank]["TORCHELASTIC_ERROR_FILE"])
        assert error_file.parent.is_dir(), "torch's @record can write where it is told"
