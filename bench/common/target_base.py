"""What a target's checker returns (`bench.targets`, `bench.controlplane.targets_controlplane`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Figures = dict[str, Any]
KindRecords = list[dict[str, Any]]


@dataclass(frozen=True)
class Measured:
    """What one run measured for a target: the figure, and whether it meets the target (None:
    a figure near the target, but not the one it sets)."""

    value: str
    met: bool | None


Checker = Callable[[Figures, KindRecords], list[Measured]]
