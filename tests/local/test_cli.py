"""The `phalanx` command line without a cluster: validation, explain, help, bad flags, Ctrl-C.

Covers: every invalid fixture refused by `validate` naming its field (CEL rules in the API
server's words), and by `run` with exit code 2 before anything starts; the shipped examples are
valid; `explain` describes fields and refuses unknown ones; `--help` on every command; a bad
flag is exit 2 naming it; Ctrl-C stops with exit 130, leaves a valid checkpoint, and the next run
resumes from it; `kill -9` of `phalanx run` leaves no process of the run, and what it left in
/dev/shm goes at the next run's start.
"""

from __future__ import annotations

import contextlib
import json
import signal
from pathlib import Path

import psutil
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from harness.controlplane import wait_until
from phalanx.cli.main import app
from phalanx.local.launch import memory_root, sweep_memory_roots
from phalanx.models import TrainingJob, field_errors
from tests.support.gang import last_step, records
from tests.support.local import QUICKSTART, manifest, phalanx, start_phalanx
from tests.support.manifests import InvalidManifest, example_paths, invalid_manifests

INVALID = invalid_manifests()
cli = CliRunner()


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_validate_refuses_each_mistake_naming_the_field_as_the_api_server(
    case: InvalidManifest,
) -> None:
    result = cli.invoke(app, ["validate", str(case.path)])
    assert result.exit_code == 2, result.output
    assert f"* {case.expected_field}" in result.output
    with pytest.raises(ValidationError) as info:
        TrainingJob.from_manifest(case.manifest)
    for error in field_errors(info.value):
        if error.source == "rule":  # the CRD's CEL message, word for word
            assert error.message in " ".join(result.output.split())


def test_run_refuses_an_invalid_manifest_with_exit_code_2(tmp_path: Path) -> None:
    case = next(c for c in INVALID if c.name == "replicas-min-greater-than-max")
    run = phalanx("run", str(case.path), "--workdir", str(tmp_path), "-o", "json")
    assert run.code == 2, run.stderr
    assert "spec.replicas.min must be less than or equal to spec.replicas.max" in run.stderr
    assert run.stdout == ""
    assert not tmp_path.joinpath("pods").exists(), "nothing may start for an invalid manifest"


def test_examples_are_valid() -> None:
    paths = [str(p) for p in example_paths()]
    result = cli.invoke(app, ["validate", *paths])
    assert result.exit_code == 0, result.output
    assert result.output.count("valid TrainingJob") == len(paths)


def test_not_a_training_job_and_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    (tmp_path / "bad.yaml").write_text("spec: [unclosed\n")
    result = cli.invoke(app, ["validate", str(tmp_path / "pod.yaml"), str(tmp_path / "bad.yaml")])
    assert result.exit_code == 2
    assert "kind: expected 'TrainingJob', got 'Pod'" in result.output
    assert "is not valid YAML" in result.output
    missing = cli.invoke(app, ["validate", str(tmp_path / "absent.yaml")])
    assert missing.exit_code == 2
    assert "cannot read" in missing.output


def test_explain_describes_a_field_with_its_rules_and_defaults() -> None:
    result = cli.invoke(app, ["explain", "trainingjob.spec.replicas"])
    assert result.exit_code == 0, result.output
    assert "FIELD: replicas <Object>" in result.output
    assert "min\t<integer> -required-" in result.output
    assert "spec.replicas.min must be less than or equal to spec.replicas.max" in result.output
    policy = cli.invoke(app, ["explain", "spec.failurePolicy"])
    assert "scheduleTimeoutSeconds\t<integer> (default: 300)" in policy.output
    assert "hangTimeoutSeconds\t<integer>\n" in policy.output  # unset: adaptive
    unknown = cli.invoke(app, ["explain", "spec.replica"])
    assert unknown.exit_code == 2
    assert 'field "replica" does not exist in spec' in unknown.output
    assert "replicas" in unknown.output


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["explain"]])
def test_help_everywhere(command: list[str]) -> None:
    result = cli.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_bad_flag_values_are_exit_2_naming_the_flag(tmp_path: Path) -> None:
    for flags, words in (
        (["--capacity-schedule", "30s"], "WHEN=NODES"),
        (["--kill-node-at", "soon"], "--kill-node-at"),
        (["--hang-node-at", "step:x"], "step:N"),
        (["--kill-rank", "x@1s"], "RANK@WHEN"),
        (["--capacity", "0"], "--capacity"),
        (["--slow-node-at", "loading"], "--slow-node-at"),
        (["--slow-node-at", "step:9", "--slowdown", "1"], "--slowdown"),
    ):
        result = cli.invoke(app, ["run", str(QUICKSTART), "--workdir", str(tmp_path), *flags])
        assert result.exit_code == 2, (flags, result.output)
        assert words in result.output, (flags, result.output)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ctrl_c_checkpoints_and_the_next_run_resumes(tmp_path: Path) -> None:
    job = manifest(tmp_path, trainer={"steps": 120})
    args = ("run", str(job), "--workdir", str(tmp_path / "run"), "-o", "json")
    first = start_phalanx(*args)
    try:
        wait_until(lambda: last_step(tmp_path / "run") >= 30, 120, "step 30", interval=0.1)
        reached = last_step(tmp_path / "run")
        first.send_signal(signal.SIGINT)
        stdout, stderr = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 130, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["phase"] == "Suspended"
    saved = summary["lastCheckpoint"]["step"]
    assert saved >= reached, f"checkpoint at {saved}, but step {reached} was reached"
    assert Path(summary["lastCheckpoint"]["path"], ".metadata").exists()

    second = phalanx(*args)
    assert second.code == 0, second.stderr[-3000:]
    assert f"resuming from the checkpoint of step {saved}" in " ".join(second.stderr.split())
    resume = [r for r in records(tmp_path / "run") if r.get("event") == "resume"][-1]
    assert resume["from"] == saved
    assert second.summary["progress"]["step"] == 120


def _gone(process: psutil.Process) -> bool:
    """It exited (a zombie nobody reaped yet counts: it runs nothing)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_kill_9_of_phalanx_run_leaves_no_process_and_the_next_run_sweeps_its_memory(
    tmp_path: Path,
) -> None:
    job = manifest(tmp_path, replicas={"min": 2, "max": 2}, trainer={"steps": 100_000})
    run = start_phalanx("run", str(job), "--workdir", str(tmp_path / "run"), "-o", "json")
    started: list[psutil.Process] = []
    try:
        wait_until(lambda: last_step(tmp_path / "run") >= 3, 120, "step 3", interval=0.1)
        started = psutil.Process(run.pid).children(recursive=True)
        agents = [p for p in started if "phalanx.agent" in p.cmdline()]
        assert len(agents) == 2, [p.cmdline() for p in started]
        assert len(started) > len(agents), "no workers under the agents"
        run.kill()
        run.communicate(timeout=30)
        wait_until(lambda: all(_gone(p) for p in started), 15, "the run's processes to end")
    finally:
        run.kill()
        for process in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()

    pattern = memory_root("*", run.pid)
    left = list(pattern.parent.glob(pattern.name))
    assert left, "the killed run's agents made no memory directory: nothing to sweep"
    running = memory_root("running-run")  # this process's: a run still going
    running.mkdir()
    try:
        swept = sweep_memory_roots()
        assert set(left) <= set(swept)
        assert not any(path.exists() for path in left)
        assert running.is_dir()
        assert running not in swept
    finally:
        running.rmdir()


def test_too_little_capacity_ends_the_run_with_exit_1_and_the_reason(tmp_path: Path) -> None:
    job = manifest(tmp_path, failurePolicy={"scheduleTimeoutSeconds": 1})
    run = phalanx(
        "run", str(job), "--workdir", str(tmp_path / "run"), "--capacity", "1", "-o", "json"
    )
    assert run.code == 1, run.stderr[-3000:]
    summary = run.summary
    assert summary["phase"] == "Failed"
    assert summary["message"] == "only 1 of 4 node pods could be scheduled; min is 2"


def test_a_command_that_cannot_start_is_a_configuration_error_not_a_restart_loop(
    tmp_path: Path,
) -> None:
    job = manifest(tmp_path, template={"spec": {"containers": [
        {"name": "trainer", "image": "x", "command": ["no-such-trainer-command"]}
    ]}})  # fmt: skip
    run = phalanx("run", str(job), "--workdir", str(tmp_path / "run"), "-o", "json")
    assert run.code == 1, run.stderr[-3000:]
    summary = run.summary
    assert summary["restarts"]["total"] == 0
    [failure] = summary["failures"]
    assert (failure["class"], failure["reason"]) == ("configuration", "CreateContainerError")
    assert "no-such-trainer-command" in summary["message"]
