"""How the report writes a share and a ratio (the report and its goodput section share them),
and what it says beside a ratio that is not like for like."""

from __future__ import annotations

import math


def pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1%}"


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "-"


PROFILED_CAVEAT = " (Phalanx's pass ran under py-spy, the baseline's did not: not like for like)"
"""Said beside a ratio whose Phalanx side was profiled: the sampler's CPU, on 2 cores, is paid by
Phalanx's pass alone (1 000 jobs' pods: 204.1 s profiled, 117.4 s not, at 73dbe2d)."""
