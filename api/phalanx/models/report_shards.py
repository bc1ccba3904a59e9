"""Where each pod's agent writes its report: node ranks (and standby indices) below
`SHARED_RANKS` on the job's heartbeat Lease together, each rank from there to `OWN_LEASES` on a
Lease of its own, and past that one Lease per `REPORTS_PER_LEASE` ranks.

Why more than one Lease: every agent reports its state (started the epoch, failed, stands by) as
an annotation of a Lease the operator watches, and a new epoch has every agent write at once.
Writes to one object conflict: the API server applies each merge patch to the object's newest
version and tries again when another write got there first, so N agents writing one Lease at
once cost it on the order of N^2 attempts, and each change sends the whole object (every report
on it) to the operator: fewer writers per Lease wrote more reports a second, and a large job's
in-place restart was acknowledged sooner (docs/figures.md, "Report Leases").

Why the first ranks share: every Lease is an object the operator creates with the job, and a
Lease per pod for many small jobs slowed their pods' creation for no faster recovery: 8 writers
on one Lease are not what slows a small job. Why not a Lease
per pod at any size: the job's Role names every report Lease (a Role that lets pods create
Leases would let them take any name in the namespace, another job's too), and at `MAX_NODES`
that Role would outgrow what etcd stores in one object; by blocks past `OWN_LEASES` it stays
well under that at the bounds.

The shard follows from the pod's name alone: node pod `<job>-<epoch>-<rank>` and standby
`<job>-<epoch>-s<index>` report on the shard of that number. No variable to pass, and it stays
the same when the pod carries over into an epoch at another rank. Shard 0 is the heartbeat Lease
itself; shard k is `<heartbeat Lease>-<k>`. The agent imports this module too (standard library
only; see `phalanx.agent.bundle`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

SHARED_RANKS: Final = 8
"""Ranks (and standby indices) below this report on the heartbeat Lease: a job of up to 8 node
pods has that one Lease, as it had before reports were sharded."""

OWN_LEASES: Final = 2048
"""Ranks from `SHARED_RANKS` to this each report on a Lease of their own: every job the
benchmarks run acknowledges without conflicts past its first 8 ranks, and the Role that names
them all still fits in etcd at `MAX_NODES`."""

REPORTS_PER_LEASE: Final = 8
"""Ranks from `OWN_LEASES` on share a Lease by this many (669 writes/s above, half of a Lease
per pod)."""


def shard(pod: str) -> int:
    """The shard of a pod's report, from the rank (or standby index) at the end of its name."""
    suffix = pod.rsplit("-", 1)[-1].removeprefix("s")
    return _shard_of(int(suffix)) if suffix.isdigit() else 0


def _shard_of(number: int) -> int:
    if number < SHARED_RANKS:
        return 0
    if number < OWN_LEASES:
        return number - SHARED_RANKS + 1
    return OWN_LEASES - SHARED_RANKS + 1 + (number - OWN_LEASES) // REPORTS_PER_LEASE


def shard_lease(heartbeat_lease: str, number: int) -> str:
    """The name of shard `number` of a job whose heartbeat Lease is `heartbeat_lease`."""
    return heartbeat_lease if number == 0 else f"{heartbeat_lease}-{number}"


def report_lease(heartbeat_lease: str, pod: str) -> str:
    """The Lease `pod`'s agent writes its report on."""
    return shard_lease(heartbeat_lease, shard(pod))


def shards_for(pods: int, names: Iterable[str] = ()) -> int:
    """How many shards hold ranks and standby indices below `pods`, and the pods in `names`."""
    needed = _shard_of(max(pods, 1) - 1) + 1
    return max([needed, *(shard(name) + 1 for name in names)])
