"""Where each pod's agent writes its report: one Lease per `REPORTS_PER_LEASE` ranks of the job.

Why more than one Lease: every agent reports its state (started the epoch, failed, stands by) as
an annotation of a Lease the operator watches. On a single Lease a job stops working well past a
few hundred pods: Kubernetes caps an object's annotations at 256 KiB all told (a report with its
key is about 250 bytes, so about 1 000 pods fit), the API server applies the writes to one
object one after another (a 2 000-pod epoch's acknowledgements would queue behind each other),
and each change sends the whole object to the operator. So the reports are sharded by rank:
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

REPORTS_PER_LEASE: Final = 100
"""Reports per Lease: about 25 KiB of annotations, a tenth of Kubernetes' cap, so a report with
a long message or many workers still fits."""


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
