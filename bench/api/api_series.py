"""What bench/api measures: one request's outcome, a target (an operation on one side), and the
series of latencies and CPU a target collected. Shared by the runner and the report."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

KUBE_PAGE = 500
"""Page size of the full list (kubectl's default chunk size; the API's page_size_max)."""


@dataclass(frozen=True)
class Outcome:
    """One logical request: whether it answered as expected, and the bytes it carried."""

    ok: bool
    size: int
    problem: str = ""


Op = Callable[[httpx.Client, int], Outcome]
"""A request (or a walk over pages) on a client; the int numbers the request within its target."""


@dataclass(frozen=True)
class Target:
    operation: str
    side: str
    """"API" (the service) or "kube" (the API server directly)."""
    op: Op


@dataclass
class Series:
    """What one target measured in one mode, summed over rounds."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0
    """Server CPU seconds: the API service, kube-apiserver and etcd."""
    client_cpu: float = 0.0
    """The load generator's CPU seconds."""
    size: int = 0
    errors: int = 0
    problem: str = ""

    def add(self, seconds: float, outcome: Outcome) -> None:
        self.latencies.append(seconds)
        self.size += outcome.size
        if not outcome.ok:
            self.errors += 1
            self.problem = self.problem or outcome.problem

    def quantile(self, q: float) -> float:
        """Nearest rank: the smallest latency with at least q of them at or below it."""
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0
