"""All registered effects, one per spec field path."""

from __future__ import annotations

from tests.unit.spec_effects import contract, memory, planner, pods
from tests.unit.spec_effects.build import Effect


def _merged(*areas: dict[str, Effect]) -> dict[str, Effect]:
    merged: dict[str, Effect] = {}
    for area in areas:
        twice = merged.keys() & area.keys()
        assert not twice, f"registered in two places: {sorted(twice)}"
        merged |= area
    return merged


EFFECTS = _merged(pods.EFFECTS, contract.EFFECTS, planner.EFFECTS, memory.EFFECTS)
"""Spec field path -> how a change of that field shows."""
