"""The repository layout keeps the standard library's `operator` importable from the repo root.

Covers: `operator/` is never a package; `python -c "import operator"` from the root gets the
stdlib; the phalanx namespace spans the product folders.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.support.manifests import REPO_ROOT


def test_operator_folder_is_not_a_package() -> None:
    assert not (REPO_ROOT / "operator/__init__.py").exists()


def test_import_operator_from_repo_root_is_the_stdlib() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import operator; print(operator.__file__)"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert Path(result.stdout.strip()).resolve().parent == stdlib


def test_python_m_pytest_runs_from_repo_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/unit/test_layout.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_import_operator_from_repo_root_is_the_stdlib" in result.stdout


PRODUCT_FOLDERS = ("api", "operator", "trainer_image")
MAX_MODULE_LINES = 400


def test_every_package_ships_py_typed() -> None:
    """PEP 561: users of the SDK and the models get our annotations. `phalanx` is a namespace
    package spread over the product folders, so each package in it carries the marker."""
    packages = [p for f in PRODUCT_FOLDERS for p in (REPO_ROOT / f / "phalanx").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()]  # fmt: skip
    assert len(packages) >= 8
    assert [p for p in packages if not (p / "py.typed").exists()] == []


def test_no_product_module_is_over_400_lines() -> None:
    """Small modules, each with one concern: a module that outgrows this is split."""
    modules = [m for f in PRODUCT_FOLDERS for m in (REPO_ROOT / f).rglob("*.py")]
    long = {
        str(m.relative_to(REPO_ROOT)): n
        for m in modules
        if (n := len(m.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
