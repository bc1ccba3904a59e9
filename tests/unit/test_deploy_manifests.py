"""deploy/ equals the chart's default render (plus the Namespace), the drift check fails with a
diff when it does not, and `kubectl kustomize deploy/` builds without the examples.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.controlplane import REPO_ROOT
from tests.support.chart import (
    RENDER_DEPLOY,
    Helm,
    Manifest,
)

DEPLOY = REPO_ROOT / "deploy"
K8S_BINARIES = REPO_ROOT / "tests/tools/k8s-binaries.sh"

# -- deploy/ ------------------------------------------------------------------------------------


def test_deploy_equals_the_chart_default_render(helm: Helm) -> None:
    result = subprocess.run(["bash", str(RENDER_DEPLOY), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_deploy_manifests_are_the_default_render_plus_the_namespace(helm: Helm) -> None:
    """The defaults, but the API service's certificate from cert-manager: a generated one would
    differ at each render, and one checked in would be everyone's key."""
    shipped = [d for d in yaml.safe_load_all((DEPLOY / "manifests/phalanx.yaml").read_text()) if d]
    namespace = shipped[0]
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["name"] == "phalanx-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert shipped[1:] == helm.render("api.tls.mode=certManager")


@pytest.fixture
def repo_copy(tmp_path: Path, helm: Helm) -> Path:
    """The parts of the repository render-deploy.sh reads and writes, in a scratch folder."""
    for part in ("charts/phalanx", "deploy", "tests/tools"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part)
    return tmp_path


def check_copy(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "tests/tools/render-deploy.sh"), "--check"],
        capture_output=True,
        text=True,
    )


def test_the_drift_check_fails_with_a_diff_when_the_manifests_differ(repo_copy: Path) -> None:
    assert check_copy(repo_copy).returncode == 0
    manifests = repo_copy / "deploy/manifests/phalanx.yaml"
    manifests.write_text(manifests.read_text().replace("replicas: 1", "replicas: 2", 1))
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "deploy/manifests/phalanx.yaml differs" in result.stderr
    assert "-  replicas: 2" in result.stdout
    assert "+  replicas: 1" in result.stdout


def test_the_drift_check_fails_when_the_chart_changes_and_deploy_is_not_rendered(
    repo_copy: Path,
) -> None:
    values = repo_copy / "charts/phalanx/values.yaml"
    values.write_text(
        values.read_text().replace("revisionHistoryLimit: 5", "revisionHistoryLimit: 3")
    )
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "+  revisionHistoryLimit: 3" in result.stdout
    write = subprocess.run(
        ["bash", str(repo_copy / "tests/tools/render-deploy.sh")], capture_output=True, text=True
    )
    assert write.returncode == 0, write.stderr
    assert check_copy(repo_copy).returncode == 0


def test_the_drift_check_fails_when_the_chart_dashboard_is_not_the_shipped_one(
    repo_copy: Path,
) -> None:
    copy = repo_copy / "charts/phalanx/dashboards/phalanx-jobs.json"
    copy.write_text(copy.read_text().replace("Phalanx: training jobs", "Edited in the chart"))
    result = check_copy(repo_copy)
    assert result.returncode == 1
    assert "charts/phalanx/dashboards/phalanx-jobs.json differs" in result.stderr


def kubectl() -> Path:
    result = subprocess.run(
        ["bash", str(K8S_BINARIES), "kubectl"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"make binaries (kubectl) failed:\n{result.stderr[-3000:]}"
    return Path(result.stdout.strip().splitlines()[-1]) / "kubectl"


def identity(manifest: Manifest) -> tuple[str, str, str]:
    meta = manifest["metadata"]
    return manifest["kind"], meta.get("namespace", ""), meta["name"]


def test_kubectl_kustomize_builds_deploy_without_the_examples() -> None:
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(DEPLOY)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    shipped = [d for d in yaml.safe_load_all((DEPLOY / "manifests/phalanx.yaml").read_text()) if d]
    assert sorted(map(identity, built)) == sorted(map(identity, shipped))
    assert not [m for m in built if m["kind"] == "TrainingJob"]
