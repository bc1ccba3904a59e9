"""How the report writes a share and a ratio (the report and its goodput section share them),
so that the two say them alike."""

from __future__ import annotations

import math


def pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1%}"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "-"
