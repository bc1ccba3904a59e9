"""The CLI keeps kubectl's conventions where a kubectl user brings habits and scripts.

Covers: `-o` takes kubectl's formats and refuses any other before connecting (exit 2, the
choices named); each format prints the job as kubectl would (YAML that reads back as the same
object, `-o name` as `trainingjob.phalanx.dev/<name>`, `wide` adding columns and conditions);
`--version` prints the version that the chart and the images carry; completion can be installed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.jobs import job_model
from phalanx.cli import output
from phalanx.cli.main import app
from phalanx.models.responses import JobDetail, JobSummary
from phalanx.models.status import Condition, TrainingJobStatus

ROOT = Path(__file__).resolve().parents[2]
cli = CliRunner()


def _detail() -> JobDetail:
    model = job_model("fmt-job")
    status = TrainingJobStatus(
        phase="Running", epoch=2, nodes=2, world_size=4,
        conditions=[Condition(type="Ready", status="True", reason="Training", message="all up")],
    )  # fmt: skip
    return JobDetail(namespace="ns", name="fmt-job", spec=model.spec, status=status)


def test_an_unknown_output_format_is_refused_with_the_choices() -> None:
    refused = cli.invoke(app, ["get", "fmt-job", "-o", "bogus", "--server", "http://unused"])
    assert refused.exit_code == 2
    for choice in ("text", "wide", "name", "json", "yaml"):
        assert f"'{choice}'" in refused.output


def test_yaml_reads_back_as_the_same_job(capsys: pytest.CaptureFixture[str]) -> None:
    detail = _detail()
    output.job(detail, output.Format.yaml)
    printed = capsys.readouterr().out
    assert not printed.lstrip().startswith("{"), "YAML, not JSON"
    assert JobDetail.model_validate(yaml.safe_load(printed)) == detail


def test_name_is_kubectls_resource_slash_name(capsys: pytest.CaptureFixture[str]) -> None:
    output.job(_detail(), output.Format.name)
    summaries = [JobSummary(namespace="ns", name=n) for n in ("a", "b")]
    output.jobs(summaries, output.Format.name)
    assert capsys.readouterr().out.splitlines() == [
        "trainingjob.phalanx.dev/fmt-job", "trainingjob.phalanx.dev/a", "trainingjob.phalanx.dev/b",
    ]  # fmt: skip


def test_wide_adds_columns_to_a_list_and_conditions_to_a_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    created = datetime.now(UTC) - timedelta(hours=3, minutes=20, seconds=5)
    summary = JobSummary(namespace="ns", name="a", goodput=0.975, created=created,
                         labels={"team": "nlp"})  # fmt: skip
    output.jobs([summary], output.Format.text)
    narrow = capsys.readouterr().out
    output.jobs([summary], output.Format.wide)
    wide = capsys.readouterr().out
    assert "GOODPUT" not in narrow
    assert "team=nlp" not in narrow
    assert re.search(r"97\.5%\s+3h20m\s+team=nlp", wide), wide
    output.job(_detail(), output.Format.text)
    assert "CONDITION" not in capsys.readouterr().out
    output.job(_detail(), output.Format.wide)
    assert re.search(r"Ready\s+True\s+Training\s+all up", capsys.readouterr().out)


def test_the_version_is_the_charts_and_the_images() -> None:
    shown = cli.invoke(app, ["--version"])
    assert shown.exit_code == 0
    assert shown.output.strip() == f"phalanx {version('phalanx')}"
    chart = yaml.safe_load((ROOT / "charts/phalanx/Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == version("phalanx")
    suite_tag = re.search(
        r"PHALANX_IMAGE_TAG:-([^}]+)}", (ROOT / "tests/tools/kind.sh").read_text()
    )
    assert suite_tag is not None
    assert suite_tag.group(1) == version("phalanx")


def test_completion_can_be_installed() -> None:
    shown = cli.invoke(app, ["--show-completion"], env={"SHELL": "/bin/bash"})
    assert shown.exit_code == 0, shown.output
    assert "complete" in shown.output
    assert "phalanx" in shown.output.lower()
