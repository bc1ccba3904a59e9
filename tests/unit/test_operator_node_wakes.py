"""Which jobs a node's change wakes: one that got worse (NotReady, cordoned) wakes only the jobs
with pods on it; one that got better wakes every job (capacity to grow into); a change of
anything else wakes none. Real Reconciler, real asyncio events; the executor is never reached."""

from __future__ import annotations

from typing import cast

from phalanx.operator.execute import Executor
from phalanx.operator.handlers import Reconciler
from phalanx.operator.metrics import OperatorMetrics
from phalanx.operator.planner import NodeView, PlannerConfig


def _reconciler() -> Reconciler:
    unused = cast(Executor, None)  # node_seen never calls the executor
    return Reconciler(unused, OperatorMetrics(), PlannerConfig(), 30.0, None)


def _woken(reconciler: Reconciler, *keys: tuple[str, str]) -> set[str]:
    woken = {key[1] for key in keys if reconciler.waker(key).is_set()}
    for key in keys:
        reconciler.waker(key).clear()
    return woken


def test_a_node_that_got_worse_wakes_only_its_jobs_one_that_got_better_wakes_all() -> None:
    reconciler = _reconciler()
    a, b, c = ("ns", "a"), ("ns", "b"), ("ns", "c")
    for key in (a, b, c):
        reconciler.waker(key)
    reconciler.pod_placed(a, "n1")
    reconciler.pod_placed(b, "n2")
    reconciler.pod_placed(c, None)  # pending: not on a node
    reconciler.node_seen(NodeView(name="n1", ready=True))
    reconciler.node_seen(NodeView(name="n2", ready=True))
    assert _woken(reconciler, a, b, c) == set()  # first seen: nothing changed

    reconciler.node_seen(NodeView(name="n1", ready=False))
    assert _woken(reconciler, a, b, c) == {"a"}
    reconciler.node_seen(NodeView(name="n2", ready=True, leaving="cordoned"))
    assert _woken(reconciler, a, b, c) == {"b"}
    reconciler.node_seen(NodeView(name="n2", ready=True, leaving="cordoned", gpu_memory=1))
    assert _woken(reconciler, a, b, c) == set()  # not its health

    reconciler.node_seen(NodeView(name="n1", ready=True))
    assert _woken(reconciler, a, b, c) == {"a", "b", "c"}
    reconciler.node_seen(NodeView(name="n2", ready=True))
    assert _woken(reconciler, a, b, c) == {"a", "b", "c"}


def test_the_reconciles_nodes_follow_each_node_seen_and_drop_one_gone_from_the_index() -> None:
    """The map the reconciles read (`_nodes_by_name`) is kept as nodes are seen, not made from
    kopf's index each time; kopf tells no handler of a deleted node, so a smaller index drops it.
    A node seen but not yet in the index (kopf stores a handler's answer after it returns) comes
    from the index once it is there."""
    reconciler = _reconciler()
    n1, n2 = NodeView(name="n1", ready=True), NodeView(name="n2", ready=True)
    reconciler.node_seen(n1)
    reconciler.node_seen(n2)
    assert reconciler._nodes_by_name([n1, n2]) == {"n1": n1, "n2": n2}

    lost = NodeView(name="n1", ready=False)
    reconciler.node_seen(lost)  # its index entry is replaced only after the handler returns
    assert reconciler._nodes_by_name([n1, n2])["n1"] == lost

    assert reconciler._nodes_by_name([n2]) == {"n2": n2}, "n1 deleted: gone from the index"
    n3 = NodeView(name="n3", ready=True)
    reconciler.node_seen(n3)
    assert reconciler._nodes_by_name([n2]) == {"n2": n2}, "n3 not indexed yet: left out"
    assert reconciler._nodes_by_name([n2, n3]) == {"n2": n2, "n3": n3}
