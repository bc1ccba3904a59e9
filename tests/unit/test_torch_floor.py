"""The oldest torch the resume library supports: one value, declared in pyproject and checked at
import with a message that names it. (CI also runs the library's tests with that torch:
`make test-torch-floor`.)"""

from __future__ import annotations

import re
import tomllib

import pytest
import torch

from phalanx.resume.compat import TORCH_FLOOR, TorchTooOldError, release, require_torch
from tests.support.local import ROOT


def test_pyproject_declares_the_floor_the_library_checks() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [bound] = [
        d for d in project["project"]["optional-dependencies"]["trainer"] if d.startswith("torch")
    ]
    found = re.fullmatch(r"torch>=(\d+)\.(\d+)", bound)
    assert found is not None, bound
    assert (int(found[1]), int(found[2])) == TORCH_FLOOR


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.9.0", (2, 9)), ("2.10.0a0+git1a2b3c", (2, 10)), ("2.15.0+cu128", (2, 15))],
)
def test_torch_versions_are_read_as_releases(version: str, expected: tuple[int, int]) -> None:
    assert release(version) == expected


def test_an_older_torch_is_refused_naming_both_versions() -> None:
    with pytest.raises(
        TorchTooOldError, match=r"needs torch >= 2\.9; this environment has torch 2\.8\.0\+cu126"
    ):
        require_torch("2.8.0+cu126")


def test_the_floor_and_this_environments_torch_pass() -> None:
    require_torch("2.9.0")
    require_torch(torch.__version__)
