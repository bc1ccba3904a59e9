"""The CRD is generated from the models, is structural, documents every field, and the shipped
copies cannot drift from the models unnoticed.

Covers: descriptions everywhere (for `kubectl explain`); no constructs a structural schema forbids;
subresources and printer columns; `make verify-generated` passes now and fails after a model edit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from phalanx.models import crdgen
from tests.support.manifests import REPO_ROOT

FORBIDDEN_KEYWORDS = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const"}


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def shipped_schema() -> dict[str, Any]:
    crd = yaml.safe_load((REPO_ROOT / crdgen.CRD_PATH).read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_every_property_has_a_description() -> None:
    schema = crdgen.openapi_schema()
    missing = [
        f"{parent}.{name}"
        for parent, node in walk(schema)
        for name, prop in node.get("properties", {}).items()
        if name != "metadata" and not prop.get("description")
    ]
    assert missing == []


def test_schema_is_structural() -> None:
    for path, node in walk(crdgen.openapi_schema()):
        assert not FORBIDDEN_KEYWORDS & node.keys(), path
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") in (None, True) or path, path


def test_rules_of_the_models_are_in_the_schema() -> None:
    spec = crdgen.openapi_schema()["properties"]["spec"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert "self.parallelism == oldSelf.parallelism" in rules
    replicas_rules = spec["properties"]["replicas"]["x-kubernetes-validations"]
    assert {r["fieldPath"] for r in replicas_rules} == {".min", ".desired"}


def test_subresources_and_printer_columns() -> None:
    version = crdgen.crd()["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas.desired"
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase", "Nodes", "World", "Epoch", "Step", "Restarts", "Age", "ETA",
    ]  # fmt: skip
    eta = version["additionalPrinterColumns"][-1]
    assert (eta["type"], eta["priority"]) == ("string", 1), "kubectl shows a future date <invalid>"


def test_chart_copy_is_toggled_and_kept() -> None:
    text = crdgen.render_chart()
    assert text.splitlines()[1] == "{{- if .Values.crds.enabled }}"
    assert "helm.sh/resource-policy: keep" in text


def test_shipped_files_are_up_to_date() -> None:
    assert shipped_schema() == crdgen.openapi_schema()
    assert crdgen.main(["--check", "--root", str(REPO_ROOT)]) == 0


def _copy_tree(dest: Path) -> None:
    shutil.copytree(REPO_ROOT / "api", dest / "api", ignore=shutil.ignore_patterns("__pycache__"))
    for rel in (crdgen.CRD_PATH, crdgen.CHART_CRD_PATH, Path("Makefile")):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / rel, dest / rel)


def _verify(root: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "api")}
    return subprocess.run(
        ["make", "-s", "-C", str(root), "verify-generated", "SETUP=", f"PYTHON={sys.executable}"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip


def test_verify_generated_fails_when_a_model_changes_without_regenerating(tmp_path: Path) -> None:
    _copy_tree(tmp_path)
    assert _verify(tmp_path).returncode == 0

    spec_py = tmp_path / "api/phalanx/models/spec.py"
    source = spec_py.read_text()
    edited = source.replace(
        '    """Hot standby pods kept ready', '    """Warm spare pods kept ready'
    )
    assert edited != source
    spec_py.write_text(edited)

    result = _verify(tmp_path)
    assert result.returncode != 0
    assert str(crdgen.CRD_PATH) in result.stdout + result.stderr
    assert "Warm spare pods" in result.stdout
