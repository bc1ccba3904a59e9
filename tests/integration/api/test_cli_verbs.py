"""`phalanx submit | list | get | scale | suspend | resume | delete` against the API service with
a token from TokenRequest: the CLI acts with the caller's RBAC rights, and API errors are exit 1
in the API's words."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from kubernetes import client as k8s
from typer.testing import CliRunner

from harness.controlplane import wait_until
from harness.jobs import job_manifest
from harness.rbac import grant_jobs, identity
from phalanx.cli.main import app

cli = CliRunner()


def test_cluster_verbs(
    api_url: str, kube_client: k8s.ApiClient, namespace: str, tmp_path: Path
) -> None:
    user = identity(kube_client, namespace, "cli-user")
    grant_jobs(kube_client, namespace, user)
    conn = ["--server", api_url, "--token", user.token, "-n", namespace]
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(job_manifest("cli-job")))

    submitted = cli.invoke(app, ["submit", str(job), *conn, "-o", "json"])
    assert submitted.exit_code == 0, submitted.output
    assert json.loads(submitted.output)["name"] == "cli-job"

    def listed() -> bool:
        result = cli.invoke(app, ["list", *conn, "-o", "json"])
        assert result.exit_code == 0, result.output
        return [j["name"] for j in json.loads(result.output)] == ["cli-job"]

    wait_until(listed, 10, "the submitted job in the list")
    scaled = cli.invoke(app, ["scale", "cli-job", "3", *conn])
    assert scaled.exit_code == 0, scaled.output
    got = cli.invoke(app, ["get", "cli-job", *conn, "-o", "json"])
    assert json.loads(got.output)["spec"]["replicas"]["desired"] == 3
    suspended = cli.invoke(app, ["suspend", "cli-job", *conn, "-o", "json"])
    assert json.loads(suspended.output)["spec"]["suspend"] is True
    resumed = cli.invoke(app, ["resume", "cli-job", *conn, "-o", "json"])
    assert json.loads(resumed.output)["spec"]["suspend"] is False
    out_of_range = cli.invoke(app, ["scale", "cli-job", "9", *conn])
    assert out_of_range.exit_code == 1
    assert "spec.replicas.desired" in out_of_range.output
    deleted = cli.invoke(app, ["delete", "cli-job", *conn])
    assert deleted.exit_code == 0, deleted.output

    def gone() -> bool:
        missing = cli.invoke(app, ["get", "cli-job", *conn])
        return missing.exit_code == 1 and "not found" in missing.output

    wait_until(gone, 10, "the deleted job to be gone (the watch cache follows)")
    no_token = cli.invoke(app, ["list", "--server", api_url, "-n", namespace])
    assert no_token.exit_code == 1
    assert "401" in no_token.output
