"""Where each pod's agent writes its report: one Lease per `REPORTS_PER_LEASE` ranks of the job.

Why more than one Lease: every agent reports its state (started the epoch, failed, stands by) as
an annotation of a Lease the operator watches, and a new epoch has every agent write at once.
Writes to one object conflict: the API server applies each merge patch to the object's newest
version and tries again when another write got there first, so N agents writing one Lease at
once cost it on the order of N^2 attempts. Measured here (2 000 reports from 128 writers at once,
kube-apiserver v1.33 on 2 cores): one Lease per pod 1 290 writes/s, per 4 pods 922/s, per 8
669/s, per 10 410/s, per 20 355/s, per 100 71/s at 32 writers and requests timing out (10 s) at
128. Kubernetes also caps an object's annotations at 256 KiB (about 1 000 reports), and each
change sends the whole object to the operator. One Lease per pod would need a Role that names
every pod's Lease (epochs make new pods) or lets pods create Leases (any name in the namespace:
another job's Lease could be taken). So the reports are sharded by rank:
node pod `<job>-<epoch>-<rank>` and standby `<job>-<epoch>-s<index>` report on shard
`number // REPORTS_PER_LEASE`. Shard 0 is the heartbeat Lease itself, so a job of up to
`REPORTS_PER_LEASE` pods keeps the objects it had; shard k is `<heartbeat Lease>-<k>`.

The shard follows from the pod's name alone: no variable to pass, and it stays the same when the
pod carries over into an epoch at another rank. The agent imports this module too (standard
library only; see `phalanx.agent.bundle`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

REPORTS_PER_LEASE: Final = 8
"""Reports per Lease: a job of up to 8 node pods keeps the one Lease it had, and writers per
object stay few (669 writes/s above, half of one Lease per pod). A job of 2 000 pods has 250
Leases, which its Role names; at `MAX_NODES` that Role names 12 500 (about 300 KiB)."""


def shard(pod: str) -> int:
    """The shard of a pod's report: its rank (or standby index) in its name, by blocks."""
    suffix = pod.rsplit("-", 1)[-1].removeprefix("s")
    return int(suffix) // REPORTS_PER_LEASE if suffix.isdigit() else 0


def shard_lease(heartbeat_lease: str, number: int) -> str:
    """The name of shard `number` of a job whose heartbeat Lease is `heartbeat_lease`."""
    return heartbeat_lease if number == 0 else f"{heartbeat_lease}-{number}"


def report_lease(heartbeat_lease: str, pod: str) -> str:
    """The Lease `pod`'s agent writes its report on."""
    return shard_lease(heartbeat_lease, shard(pod))


def shards_for(pods: int, names: Iterable[str] = ()) -> int:
    """How many shards hold ranks and standby indices below `pods`, and the pods in `names`."""
    needed = max(1, -(-pods // REPORTS_PER_LEASE))
    return max([needed, *(shard(name) + 1 for name in names)])
