"""The manifests tests feed to the models and to the API server: shipped examples and mistakes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "deploy/examples"
INVALID_DIR = REPO_ROOT / "tests/fixtures/invalid"
KUBECTL_GET_COLUMNS = ["NAME", "PHASE", "NODES", "WORLD", "EPOCH", "STEP", "RESTARTS", "AGE"]
"""The columns `kubectl get tj` shows (the CRD's printer columns, as a user reads them)."""
_EXPECT = re.compile(r"^# expect-field: (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class InvalidManifest:
    """A TrainingJob with one mistake, and the field an error about it must name."""

    path: Path
    manifest: dict[str, Any]
    expected_field: str

    @property
    def name(self) -> str:
        return self.path.stem


def load_yaml(path: Path) -> dict[str, Any]:
    """One YAML document as a dict."""
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path} is not a YAML mapping"
    return doc


def example_paths() -> list[Path]:
    """Every TrainingJob manifest shipped in deploy/examples/."""
    return sorted(EXAMPLES_DIR.glob("*.yaml"))


def invalid_manifests() -> list[InvalidManifest]:
    """Every manifest in tests/fixtures/invalid/, with its `# expect-field:` header."""
    result = []
    for path in sorted(INVALID_DIR.glob("*.yaml")):
        match = _EXPECT.search(path.read_text())
        assert match, f"{path} lacks an '# expect-field: <path>' header"
        result.append(InvalidManifest(path, load_yaml(path), match.group(1)))
    return result
