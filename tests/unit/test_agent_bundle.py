"""The injected agent: one zipapp that any image's `python3` runs with nothing installed.

Covers: the zipapp imports only the standard library (run with `-I -S`: no site-packages, so
pydantic, the Kubernetes client and torch cannot be found); it runs a gang of Python workers
(warm forks of the image's interpreter) and of a non-Python command, each with its ranks, and
every worker, a plain subprocess too, imports `phalanx.progress` from the zip; a failing worker
makes the agent exit as it does when installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.agent import bundle, torchrun
from phalanx.models import env, exits

BARE = [sys.executable, "-I", "-S"]
"""The interpreter without site-packages: what an image with only python3 offers the agent."""


@pytest.fixture(scope="module")
def zipapp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bundle.write(tmp_path_factory.mktemp("agent"))


def pod_env(nproc: int, tmp: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return {
        **keep,
        **env.rendezvous("127.0.0.1", 29555, 1, 0, nproc),
        env.PHALANX_TERMINATION_LOG: str(tmp / "termination-log"),
        "HOSTNAME": "job-1-0",
    }


def test_the_zipapp_imports_only_the_standard_library(zipapp: Path) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(zipapp)!r}); import phalanx.agent.main; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pydantic', 'pydantic_settings', 'kubernetes', 'torch', 'yaml', 'numpy'}))"
    )
    done = subprocess.run([*BARE, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("launch", [["python3"], ["torchrun", "--nproc-per-node=2"]])
def test_python_workers_get_their_ranks_and_phalanx_progress(
    zipapp: Path, tmp_path: Path, launch: list[str]
) -> None:
    """A torchrun command too: this machine's torchrun is never started (-S hides it), the
    agent runs its script."""
    script = tmp_path / "train.py"
    script.write_text(
        "import os, phalanx.progress as p\n"
        "print('rank', os.environ['RANK'], os.environ['WORLD_SIZE'], p.__file__, flush=True)\n"
    )
    done = subprocess.run(
        [*BARE, str(zipapp), *launch, str(script)],
        env=pod_env(2, tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == exits.OK, done.stderr
    lines = sorted(line.split() for line in done.stdout.splitlines() if line.startswith("rank"))
    assert [line[1:3] for line in lines] == [["0", "2"], ["1", "2"]]
    assert all(line[3].startswith(str(zipapp)) for line in lines)


def test_a_plain_subprocess_worker_finds_phalanx_progress_too(zipapp: Path, tmp_path: Path) -> None:
    command = 'python3 -c \'import os, phalanx.progress; print("ok", os.environ["LOCAL_RANK"])\''
    done = subprocess.run(
        [*BARE, str(zipapp), "sh", "-c", command],
        env=pod_env(2, tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == exits.OK, done.stderr
    assert sorted(done.stdout.split()) == ["0", "1", "ok", "ok"]


def test_a_failed_worker_fails_the_pod_with_its_reason(zipapp: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*BARE, str(zipapp), "sh", "-c", 'test "$RANK" = 0 || exit 3; sleep 30'],
        env=pod_env(2, tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == exits.APPLICATION, done.stderr
    assert "exit" in (tmp_path / "termination-log").read_text()


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        (["torchrun", "train.py", "--lr", "3"], ["PY", "train.py", "--lr", "3"]),
        (
            ["torchrun", "--nnodes=1:4", "--nproc-per-node", "2", "--standalone", "train.py"],
            ["PY", "train.py"],
        ),
        (["torchrun", "-m", "pkg.train", "--x"], ["PY", "-m", "pkg.train", "--x"]),
        (["torchrun", "--no-python", "./run.sh", "a"], ["./run.sh", "a"]),
        (["python3", "-m", "torch.distributed.run", "--max-restarts", "3", "t.py"], ["PY", "t.py"]),
        (["python3", "train.py"], ["python3", "train.py"]),
        (["bash", "-c", "torchrun train.py"], ["bash", "-c", "torchrun train.py"]),
    ],
)
def test_a_torchrun_command_runs_its_script_with_the_agent_as_launcher(
    command: list[str], runs: list[str]
) -> None:
    assert torchrun.unwrap(command, python="PY") == runs


def test_the_zipapp_runs_on_python_3_9_and_later(tmp_path: Path) -> None:
    """What it claims in its __main__ (and the README): vermin reads every file for the oldest
    Python its syntax and standard-library calls need. The resume library, which workers import
    with the image's torch, needs what torch needs (3.10 since torch 2.9)."""
    for inside, data in bundle.files().items():
        (tmp_path / inside).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / inside).write_bytes(data)
    library = tmp_path / "phalanx" / "resume"
    rest = [path for path in tmp_path.rglob("*.py") if library not in path.parents]
    for target, paths in (("3.9", rest), ("3.10", sorted(library.glob("*.py")))):
        done = subprocess.run(
            [Path(sys.executable).with_name("vermin"), "--no-tips", "--violations",
             f"-t={target}-", *paths],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr


def test_an_image_without_its_checkpoint_urls_filesystem_stops_before_training(
    zipapp: Path, tmp_path: Path
) -> None:
    """An image's python3 without s3fs (and fsspec): the pod stops at once, naming the field
    and the modules, before any worker starts (the workers' command would leave a mark)."""
    mark = tmp_path / "a-worker-ran"
    done = subprocess.run(
        [*BARE, str(zipapp), "sh", "-c", f"touch {mark}"],
        env={**pod_env(1, tmp_path), env.PHALANX_CHECKPOINT_URL: "s3://team-a/llama"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == exits.STORAGE_UNAVAILABLE, done.stderr
    reason = (tmp_path / "termination-log").read_text()
    assert reason.startswith("spec.checkpoint.url s3://team-a/llama needs the Python modules ")
    assert "fsspec and s3fs" in reason
    assert not mark.exists()
