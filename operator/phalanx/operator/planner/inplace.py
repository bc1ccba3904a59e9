"""In-place restarts: which pods carry over into a new epoch, and how the planner sees them.

Why: a restart that recreates the whole gang pays pod start-up, interpreter and torch imports on
every node. Pods whose agent is alive and answers (`PodView.reusable`) keep running instead: the
new epoch's assignment gives each one a node rank (survivors keep theirs where they can), hot
spares fill the ranks of lost pods, and only what is still missing is created. The status keeps
the carried-over pods (`EpochState.ranks` and `.standbys`), and `effective` shows them to the rest
of the ladder as pods of the current epoch, so every other rule reads them like new ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from phalanx.models.status import EpochState
from phalanx.operator.planner import congestion
from phalanx.operator.planner.observed import Observed, PodView


def effective(observed: Observed, epoch: int, nodes: int, current: EpochState) -> Observed:
    """The snapshot as the current epoch sees it: carried-over pods with their new epoch, rank
    and role; a carried-over pod whose agent has not yet started the epoch is still Pending; a
    pod whose agent reported its workers' failure in its epoch has failed."""
    pods = []
    for pod in observed.pods:
        if pod.name in current.ranks:
            pod = pod.but(epoch=epoch, rank=current.ranks[pod.name], role="node", epoch_nodes=nodes)
            if pod.phase == "Running" and not _acknowledged(pod):
                pod = pod.but(phase="Pending", awaiting_start=True)
        elif pod.name in current.standbys:
            pod = pod.but(epoch=epoch, rank=current.standbys[pod.name])
        pods.append(_with_reported_failure(pod))
    return dataclasses.replace(observed, pods=tuple(pods))


def _acknowledged(pod: PodView) -> bool:
    """Its agent started (or finished) the pod's current epoch."""
    return congestion.started(pod, pod.epoch)


def _with_reported_failure(pod: PodView) -> PodView:
    report = pod.agent
    if report is None or report.state != "failed" or report.epoch != pod.epoch:
        return pod
    return dataclasses.replace(
        pod,
        reported_failure=True,
        exit_code=report.exit_code,
        terminated_reason="Error",
        message=report.message,
    )


def carried_over(
    observed: Observed, epoch: int, nodes: int, avoid: frozenset[str] = frozenset(),
    exclude: frozenset[str] = frozenset(),
) -> tuple[dict[str, int], list[str]]:  # fmt: skip
    """For a new epoch of `nodes` ranks after `epoch`: node ranks of the pods that carry over,
    by name (survivors keep their rank if it still exists, then fill the lowest free ranks, then
    hot spares do), and the spare standby pods left over, in order. A pod on a node in `avoid`
    (where a straggler ran) or on a node the cluster is taking away (`Observed.leaving`) does
    not carry over: the job is moving off that node; nor does a pod named in `exclude` (a
    silent one)."""
    survivors = sorted(
        (
            p
            for p in observed.node_pods(epoch).values()
            if _can_carry(observed, p, avoid) and p.name not in exclude
        ),
        key=lambda p: p.rank,
    )
    spares = [
        p.name
        for p in sorted(observed.standby_pods(epoch), key=lambda p: p.rank)
        if _can_carry(observed, p, avoid)
    ]
    free = list(range(nodes))
    ranks: dict[str, int] = {}
    for pod in survivors:
        if pod.rank in free:
            ranks[pod.name] = pod.rank
            free.remove(pod.rank)
    for name in [p.name for p in survivors if p.name not in ranks] + spares:
        if free:
            ranks[name] = free.pop(0)
    return ranks, [name for name in spares if name not in ranks]


def _can_carry(observed: Observed, pod: PodView, avoid: frozenset[str] = frozenset()) -> bool:
    """Whether the pod can take the next epoch in place. One whose agent has not yet started
    the current epoch, but is not overdue (`unresponsive` names those, and the caller excludes
    them), carries over too: on a large job the acknowledgements of one epoch may still be on
    their way when another failure starts the next, and a pod not yet heard from is not a pod
    gone (left out, most of a large job's pods were replaced: docs/figures.md, "Large job")."""
    acknowledged = pod.role == "standby" or _acknowledged(pod) or pod.awaiting_start
    avoided = pod.node_name is not None and pod.node_name in avoid
    reusable = pod.reusable or (
        pod.awaiting_start and pod.agent is not None and not pod.deleting
        and pod.stop_deadline is None
    )  # fmt: skip
    return (
        reusable
        and acknowledged
        and not avoided
        and not observed.on_lost_node(pod)
        and observed.leaving(pod) is None
    )


def runnable_nodes(
    observed: Observed, epoch: int, nodes: int, unresponsive: frozenset[str] = frozenset(),
    avoid: frozenset[str] = frozenset(),
) -> int:  # fmt: skip
    """How many node pods could run a new epoch at once: all of the epoch's ranks except those
    whose machine is gone (a NotReady node, a pod in phase Unknown, an agent presumed gone) or
    that the job is leaving (on a node in `avoid`, or one the cluster is taking away), plus
    ready hot spares off those nodes. A restart at this size needs no wait for a replacement
    that cannot come."""
    pods = observed.node_pods(epoch)
    gone = sum(
        1
        for p in pods.values()
        if observed.on_lost_node(p)
        or p.phase == "Unknown"
        or p.name in unresponsive
        or (p.node_name is not None and p.node_name in avoid)
        or observed.leaving(p) is not None
    )
    spares = sum(1 for p in observed.standby_pods(epoch) if _can_carry(observed, p, avoid))
    return nodes - gone + spares


BUSY_ACK_FACTOR = 6.0
"""A carried-over agent that still renews its report since the epoch began is alive, only busy
(its loop blocked in the first fork of a cold fork server, importing torch: 7.5 s measured on
this 2-core machine with one core taken): it gets this many times the ack timeout."""

ACK_SPREAD = 3.0
"""A carried-over agent is presumed gone once it is this many times later than the slowest of
its peers that did start the epoch (and past the settle floor)."""


def unresponsive(observed: Observed, epoch: int, current: EpochState, now: datetime,
                 ack_seconds: float, settle_seconds: float,
                 ) -> tuple[list[PodView], datetime | None]:  # fmt: skip
    """`overdue`, unless other epochs' acknowledgements are arriving late (`congestion`): then
    none is replaced before `BUSY_ACK_FACTOR` times the timeout; until then, look again once
    the settle period passed."""
    late, look_again = overdue(observed, epoch, current, now, ack_seconds, settle_seconds)
    out = congestion.assignment_out(current)
    if late and out is not None and congestion.holds(observed.late_acks_at, now, settle_seconds):
        bound = out + timedelta(seconds=ack_seconds * BUSY_ACK_FACTOR)
        if now < bound:
            return [], min(now + timedelta(seconds=settle_seconds), bound)
    return late, look_again


def overdue(observed: Observed, epoch: int, current: EpochState, now: datetime,
            ack_seconds: float, settle_seconds: float,
            ) -> tuple[list[PodView], datetime | None]:  # fmt: skip
    """Carried-over pods whose agent has not started the epoch (a lost or frozen machine that
    its node status does not show yet, a stopped agent): they are replaced. Due `ack_seconds`
    after the epoch began, or sooner when every other carried-over agent has started it: at
    `ACK_SPREAD` times the slowest one's delay, and at least `settle_seconds` after the start.
    Why: a lost node's peers report their collective's failure at once, long before the node
    turns NotReady, so the restart carries the lost pod too; its silence among peers that all
    answered within a second is the sign that it is gone. An agent that reported anything since
    the epoch began is alive, only busy (a slow start on a loaded machine): it gets
    `ack_seconds`, and one whose agent still renews its report gets `BUSY_ACK_FACTOR` times
    that. While other agents' acknowledgements still arrive (one within `settle_seconds`), no
    pod is late before `BUSY_ACK_FACTOR` times the timeout: on a large job the fan-out itself
    takes seconds (docs/figures.md, "Large job"), and a lost machine is a few silent pods, not
    most of them. Also returns
    when to look again. The clock starts when the assignment goes out: after an application
    failure's backoff, not when the epoch was decided (agents cannot start an epoch they have
    not been told of)."""
    start = congestion.assignment_out(current)
    if start is None or now < start:
        return [], None  # the backoff's own requeue looks again when the assignment is out
    carried = [p for p in observed.node_pods(epoch).values() if p.name in current.ranks]
    silent = [p for p in carried if p.phase == "Pending" and not p.deleting]
    due = start + timedelta(seconds=ack_seconds)
    busy_due = start + timedelta(seconds=ack_seconds * BUSY_ACK_FACTOR)
    if not silent:
        return [], None

    def renewing(pod: PodView) -> bool:
        renewed = pod.agent.renewed if pod.agent is not None else None
        return renewed is not None and renewed >= start

    quiet = {p.name for p in silent}  # by name: comparing views field by field is O(n) each
    answered = [p.agent.time for p in carried if p.name not in quiet and p.agent is not None]
    if answered and len(answered) + len(silent) == len(carried):
        slowest = max(0.0, max((t - start).total_seconds() for t in answered))
        settled = start + timedelta(seconds=max(settle_seconds, ACK_SPREAD * slowest))
        mute = [p for p in silent if (p.agent is None or p.agent.time < start) and not renewing(p)]
        if mute and now >= settled:
            return mute, None
        due = min(due, settled) if mute else due
    late = [p for p in silent if now >= (busy_due if renewing(p) else due)]
    if late and answered:  # still arriving: the fan-out is under way, nobody is late yet
        arriving = max(answered) + timedelta(seconds=settle_seconds)
        if now < min(arriving, busy_due):
            return [], min(arriving, busy_due)
    if late:
        return late, None
    return [], min(busy_due if renewing(p) else due for p in silent)


@dataclass(frozen=True)
class Silence:
    """A pod of the epoch that a live peer's agent no longer hears."""

    pod: PodView
    seconds: float
    """How long the peer had not heard it, when it said so."""
    heard_by: PodView


def silent(observed: Observed, epoch: int) -> list[Silence]:
    """Pods of `epoch` that an agent of the same epoch reports silent (`phalanx.agent.peers`):
    node rank 0's agent hears every other's pings, node ranks 1 and 2 hear its answers. The
    word of a live peer, so an API server or watch that is merely slow cannot fake it.

    Two agents that cannot hear each other (a partition) both say so: the pod more peers call
    silent is, or, between two alike, the higher node rank (node rank 0 hears everyone), and
    what a silent pod said of others no longer counts."""
    pods = observed.node_pods(epoch)
    accused: dict[int, list[tuple[float, PodView]]] = {}
    for reporter in pods.values():
        report = reporter.agent
        if report is None or report.epoch != epoch or report.state not in ("running", "failed"):
            continue
        for rank, seconds in report.silent_nodes.items():
            pod = pods.get(rank)
            if pod is not None and pod is not reporter and not pod.deleting:
                accused.setdefault(rank, []).append((seconds, reporter))
    found: dict[str, Silence] = {}
    for rank in sorted(accused, key=lambda r: (-len(accused[r]), -r)):
        live = [(seconds, by) for seconds, by in accused[rank] if by.name not in found]
        if live:
            seconds, by = max(live, key=lambda item: item[0])
            found[pods[rank].name] = Silence(pods[rank], seconds, by)
    return list(found.values())


def watched(observed: Observed, epoch: int) -> bool:
    """Whether the epoch's agents watch each other (in-place agents on two pods or more)."""
    pods = observed.node_pods(epoch)
    return len(pods) >= 2 and all(p.agent is not None for p in pods.values())
