"""`PodView.but`: the planner's fast copy-with-changes is `dataclasses.replace`, result for result."""

from __future__ import annotations

import dataclasses

import pytest

from phalanx.operator.planner import PodView
from tests.unit.planner.builders import T0


def test_but_is_replace() -> None:
    pod = PodView(name="j-1-0", epoch=1, rank=0, phase="Running", created=T0)
    changed = pod.but(phase="Pending", awaiting_start=True, epoch=2)
    expected = dataclasses.replace(pod, phase="Pending", awaiting_start=True, epoch=2)
    assert changed == expected
    assert hash(changed) == hash(expected)
    assert pod.phase == "Running", "the original is unchanged"


def test_but_refuses_a_field_it_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field phaze"):
        PodView(name="j-1-0", epoch=1, rank=0).but(phaze="Running")
