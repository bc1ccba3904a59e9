"""The Helm chart from tests: the pinned helm (built once by tests/tools/cluster-tools.sh), and
renders of charts/phalanx as Python objects."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import REPO_ROOT

CHART = REPO_ROOT / "charts/phalanx"
TOOLS_SCRIPT = REPO_ROOT / "tests/tools/cluster-tools.sh"
RENDER_DEPLOY = REPO_ROOT / "tests/tools/render-deploy.sh"
RELEASE = "phalanx"
NAMESPACE = "phalanx-system"
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Helm:
    """helm and its plugin folder (helm-unittest)."""

    binary: Path
    plugins: Path

    def run(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELM_PLUGINS": str(self.plugins)}
        return subprocess.run(
            [str(self.binary), *args], env=env, capture_output=True, text=True, check=check
        )

    def render(
        self,
        *sets: str,
        release: str = RELEASE,
        namespace: str = NAMESPACE,
        tests: bool = False,
        extra: tuple[str, ...] = (),
    ) -> list[Manifest]:
        """`helm template` with `--set` for each of `sets`, as a list of objects: what
        `helm install` creates, or with `tests` only the `helm test` hooks."""
        args = ["template", release, str(CHART), "--namespace", namespace, *extra]
        for item in sets:
            args += ["--set", item]
        result = self.run(*args) if tests else self.run(*args, "--skip-tests")
        assert result.returncode == 0, f"helm template {' '.join(sets)} failed:\n{result.stderr}"
        manifests = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
        return [m for m in manifests if is_test_hook(m)] if tests else manifests


def is_test_hook(manifest: Manifest) -> bool:
    annotations = manifest["metadata"].get("annotations") or {}
    return bool(annotations.get("helm.sh/hook") == "test")


def build_helm() -> Helm:
    """helm and helm-unittest, built once into the cache (later calls are cached no-ops)."""
    result = subprocess.run(
        ["bash", str(TOOLS_SCRIPT), "helm", "helm-unittest"], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(
            "could not build helm and helm-unittest (make chart-tools; it needs Go and the Go "
            f"module proxy):\n{result.stderr[-4000:]}"
        )
    bin_dir = Path(result.stdout.strip().splitlines()[-1])
    return Helm(bin_dir / "helm", bin_dir.parent.parent / "helm" / "plugins")


def of_kind(manifests: list[Manifest], *kinds: str) -> list[Manifest]:
    return [m for m in manifests if m.get("kind") in kinds]


def named(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in of_kind(manifests, kind) if m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} rendered"
    return found[0]


def env_of(deployment: Manifest) -> dict[str, str]:
    """The literal env of a Deployment's first container."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


# Value sets the chart tests render with: the defaults and each optional part.
VALUE_SETS = {
    "defaults": (),
    "namespaces": ("operator.namespaces={team-a,team-b}",),
    "no-api": ("api.enabled=false",),
    "everything-on": (
        "serviceMonitor.enabled=true",
        "networkPolicy.enabled=true",
        "operator.nccl.NCCL_SOCKET_IFNAME=eth0",
    ),
}
