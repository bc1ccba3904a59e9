"""Whether the agents' word is reaching the operator late, across jobs: a congested channel, not
dead agents.

Why: the operator tells a dead agent from a slow one by time. A carried-over pod whose agent has
not started a new epoch `assignment_ack_seconds` after its assignment went out is replaced
(`inplace.unresponsive`); one silent in its start-up for the silence timeout is frozen
(`startup.frozen_agents`). Both presume that the agents' reports reach the operator quickly, and
in a failure storm they do not: many jobs restarting at once make their agents write thousands
of reports through an API server already slow to answer, and acknowledgements come long after
their epochs began. Each pod then counted as unresponsive was replaced, its replacement's agent
had to report too, and the storm took minutes to recover instead of seconds: congestion
collapse (docs/figures.md, "Congestion").

What tells a slow channel from a dead agent without trusting the agents' clocks: other epochs'
acknowledgements arriving late, seen on the operator's own clock. While one came late within
the settle period, the API server is delivering, only behind, and a silence is no evidence yet:
the rules hold a verdict until `inplace.BUSY_ACK_FACTOR` times their timeout, then decide as
before. A dead agent in a healthy cluster is found as fast as ever (no acknowledgement is late),
and one in a storm still by its node's status or its peers' word (`PeerSilent`), which do not
wait.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from phalanx.models.status import EpochState
from phalanx.operator.planner.observed import Observed, PodView

LATE_FRACTION = 0.5
"""An acknowledgement is late when it arrives after this share of the acknowledgement timeout
(5 s by default): an in-place restart's agents acknowledge within a second or two, and a
2 000-pod fan-out's last one came after 4.6 s on kwok."""


def assignment_out(current: EpochState) -> datetime | None:
    """When the epoch's assignment went out: after an application failure's backoff, not when the
    epoch was decided (agents cannot start an epoch they have not been told of)."""
    start = current.start_time
    if start is not None and current.restart_after is not None and current.restart_after > start:
        return current.restart_after
    return start


def started(pod: PodView, epoch: int) -> bool:
    """The pod's agent started (or finished) `epoch`: only an agent's word counts."""
    return pod.agent is not None and pod.agent.epoch >= epoch and pod.agent.state != "standby"


def acknowledged(observed: Observed, epoch: int, current: EpochState) -> int:
    """How many carried-over pods' agents have started the epoch (a pod that failed or whose
    machine is gone has not)."""
    return sum(1 for p in observed.pods if p.name in current.ranks and started(p, epoch))


@dataclass
class LateAcknowledgements:
    """Operator-wide: when an acknowledgement of a new epoch was last seen arriving late. The
    reconciles of every job feed it (`seen`) and read it (`last`)."""

    ack_seconds: float
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When this operator began to count: an epoch whose assignment went out before then had
    its acknowledgements in place when the operator first saw it, not arriving."""
    _last: datetime | None = None
    _counts: dict[Hashable, tuple[int, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, job: Hashable, epoch: int, count: int, out: datetime | None,
             now: datetime) -> None:  # fmt: skip
        """A reconcile of `job` saw `count` of its epoch's carried-over pods started; those
        beyond the last count arrived now, late if `out` (`assignment_out`) was long enough
        ago. At the first sight of a job, an epoch older than the operator (`started`) counts
        none: an operator that starts, or takes over, finds its acknowledgements in place."""
        with self._lock:
            last = self._counts.get(job)
            self._counts[job] = (epoch, count)
            if out is None or (last is None and out < self.started):
                return
            before = last[1] if last is not None and last[0] == epoch else 0
            if count <= before:
                return
            if now - out >= timedelta(seconds=LATE_FRACTION * self.ack_seconds):
                self._last = now if self._last is None else max(self._last, now)

    def forget(self, job: Hashable) -> None:
        """The job is gone."""
        with self._lock:
            self._counts.pop(job, None)

    def last(self) -> datetime | None:
        with self._lock:
            return self._last


def holds(late_at: datetime | None, now: datetime, settle_seconds: float) -> bool:
    """Whether an acknowledgement arrived late within the settle period before `now`."""
    return late_at is not None and now - late_at < timedelta(seconds=settle_seconds)
