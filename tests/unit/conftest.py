"""Fixtures of the chart tests: the pinned helm (built once from Go modules) and the chart's
default render."""

from __future__ import annotations

import pytest

from tests.support.chart import Helm, Manifest, build_helm


@pytest.fixture(scope="session")
def helm() -> Helm:
    """The pinned helm and helm-unittest; the first build takes a few minutes."""
    return build_helm()


@pytest.fixture(scope="session")
def default_render(helm: Helm) -> list[Manifest]:
    return helm.render()
