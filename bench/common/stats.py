"""Order statistics for the small samples benchmarks take, named for what they are.

Why one module: a benchmark of 10 failures has no 99th percentile worth the name (it is the
largest of the 10), and a median of an even count is the mean of the two middle values, not the
lower one. Every latency the report prints goes through here, so a table never calls a maximum
"p99" and two reports never compute the same figure two ways.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

TAIL_SAMPLES = 100
"""How many samples a p99 needs before it says more than the maximum: with fewer, the tail is
reported as "max of N"."""


def median(values: Sequence[float]) -> float:
    """The interpolated median (the mean of the two middle values of an even count)."""
    return statistics.median(values)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default,
    `statistics.quantiles(method="inclusive")`): 0.5 is the median, 1.0 the maximum."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Tail:
    """The tail of a sample: its p99 when there are enough values, else its maximum."""

    value: float
    label: str
    """"p99", or "max of N"."""


def tail(values: Sequence[float]) -> Tail:
    """The p99 of at least TAIL_SAMPLES values; below that, the maximum, labelled as such."""
    if len(values) >= TAIL_SAMPLES:
        return Tail(quantile(values, 0.99), "p99")
    return Tail(max(values), f"max of {len(values)}")
