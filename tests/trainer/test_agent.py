"""The agent runs a node's workers as a gang: ranks and env for any command, a meaningful exit code
and termination message when a worker fails, a checkpoint on SIGTERM that a restart resumes, and
no worker left running when the agent is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.controlplane import REPO_ROOT, free_port, wait_until
from phalanx.models import exits
from phalanx.resume.checkpoint import CheckpointManager
from tests.support.gang import records, run_until_step, start_node

SCRIPTS = REPO_ROOT / "tests/scripts"


def test_unmodified_torchrun_script_runs_under_two_agents(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, str(SCRIPTS / "plain_ddp.py"), str(tmp_path)]
    nodes = [start_node(tmp_path / f"node{r}", 2, epoch=0, command=command, nnodes=2, node_rank=r, master_port=port)
             for r in range(2)]  # fmt: skip
    codes = [node.wait() for node in nodes]
    assert codes == [0, 0], "\n".join(node.log.read_text()[-2000:] for node in nodes)
    lines = {p.name: p.read_text().split() for p in tmp_path.glob("rank-*")}
    # world 4; local ranks 0,1 on each node; all-reduce of ranks 0+1+2+3 = 6
    assert lines == {f"rank-{r}": ["4", str(r % 2), "6"] for r in range(4)}


def test_application_error_exits_1_with_the_reason(tmp_path: Path) -> None:
    node = start_node(
        tmp_path, 3, epoch=0, command=[sys.executable, str(SCRIPTS / "fail_rank.py"), "1"]
    )
    assert node.wait() == exits.APPLICATION
    message = (tmp_path / "termination-0-0.log").read_text()
    assert "rank 1" in message
    assert "ZeroDivisionError: the user's bug" in message


def test_preflight_names_the_rank_and_host_that_could_not_join(tmp_path: Path) -> None:
    node = start_node(
        tmp_path, 3, epoch=0, command=[sys.executable, str(SCRIPTS / "preflight_probe.py"), "2"]
    )
    assert node.wait() == exits.PREFLIGHT
    message = (tmp_path / "termination-0-0.log").read_text()
    assert "rank 0 on" in message
    assert (
        "2" in message.split("rank 0 on", 1)[1]
    )  # gloo's monitored barrier names the missing rank


def test_killed_worker_stops_the_gang_with_a_signal_exit(tmp_path: Path) -> None:
    node = start_node(tmp_path, 2, epoch=0, trainer={"steps": 10_000, "step_delay_seconds": 0.02})
    run_until_step(node, tmp_path, 3)
    node.kill_a_worker()
    assert node.wait() == exits.SIGNAL_BASE + signal.SIGKILL
    assert "killed by SIGKILL" in (tmp_path / "termination-0-0.log").read_text()
    assert node.workers() == []


@pytest.mark.slow
def test_sigterm_checkpoints_within_the_grace_period_and_a_restart_resumes(tmp_path: Path) -> None:
    trainer = {"steps": 10_000, "step_delay_seconds": 0.02, "checkpoint_interval_steps": 1000}
    node = start_node(tmp_path, 2, epoch=0, trainer=trainer)
    run_until_step(node, tmp_path, 7)
    node.process.send_signal(signal.SIGTERM)
    assert node.wait(timeout=30) == exits.SIGNAL_BASE + signal.SIGTERM  # Kubernetes' default grace
    saved = CheckpointManager(str(tmp_path / "checkpoints")).valid_steps()
    assert saved, "no checkpoint was written on SIGTERM"
    assert saved[0] >= 7
    assert "preempted" in (tmp_path / "termination-0-0.log").read_text()

    node = start_node(tmp_path, 2, epoch=1, trainer={**trainer, "steps": saved[0] + 3})
    assert node.wait() == 0
    resumes = [r for r in records(tmp_path) if r.get("event") == "resume"]
    assert resumes[-1]["step"] == saved[0]


def _gone(process: psutil.Process) -> bool:
    """It exited (a zombie nobody reaped counts: it runs nothing)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("warm", [True, False], ids=["forked-by-the-fork-server", "subprocess"])
def test_a_sigkilled_agent_leaves_none_of_its_workers(tmp_path: Path, warm: bool) -> None:
    """Nothing runs an agent's cleanup when it is SIGKILLed: its workers (a Python command's warm
    forks, any other command's subprocesses) and its helpers must die with it all the same."""
    ready = tmp_path / "ready"
    ready.mkdir()
    if warm:
        script = tmp_path / "idle.py"
        script.write_text(
            "import os, pathlib, time\n"
            f"pathlib.Path({str(ready)!r}, os.environ['RANK']).touch()\n"
            "time.sleep(300)\n"
        )
        command = [sys.executable, str(script)]
    else:  # exec: what a worker starts itself is its own to stop (see agent/lifeline.py)
        command = ["sh", "-c", f'touch "{ready}/$RANK" && exec sleep 300']
    memory = {"PHALANX_CHECKPOINT_MEMORY_DIR": str(tmp_path / "memory")}  # not left in /dev/shm
    node = start_node(tmp_path, 2, epoch=0, command=command, env=memory)
    started: list[psutil.Process] = []
    try:
        wait_until(lambda: len(list(ready.iterdir())) == 2, 60, "both workers to run")
        started = psutil.Process(node.process.pid).children(recursive=True)
        workers = node.workers()
        assert len(workers) == 2
        assert set(workers) <= {p.pid for p in started}
        node.process.kill()
        node.process.wait()
        wait_until(lambda: all(_gone(p) for p in started), 15, "the agent's processes to end")
    finally:
        node.process.kill()
        for process in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def test_a_local_agent_whose_parent_died_before_it_started_exits_at_once(tmp_path: Path) -> None:
    """`phalanx run` SIGKILLed while it starts an agent: the agent cannot tie its life to a dead
    parent, so it exits before any worker starts (its parent exited but is not reaped yet)."""
    parent = subprocess.Popen(["true"])
    try:
        wait_until(lambda: _gone(psutil.Process(parent.pid)), 30, "a zombie parent")
        env = {
            "PHALANX_PARENT_PID": str(parent.pid),
            "PHALANX_CHECKPOINT_MEMORY_DIR": str(tmp_path / "memory"),
        }
        node = start_node(tmp_path, 1, epoch=0, command=["sleep", "300"], env=env)
        assert node.wait(timeout=60) == exits.SIGNAL_BASE + signal.SIGKILL, node.log.read_text()
        assert f"process {parent.pid}, whose death ends this one, is gone" in node.log.read_text()
    finally:
        parent.wait()
