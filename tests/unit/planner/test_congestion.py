"""A congested channel is not a dead agent: while other epochs' acknowledgements arrive late
(`congestion.LateAcknowledgements`, on the operator's clock), an agent's silence replaces no pod
and freezes none, up to six times the rule's timeout; with nothing late, the rules decide as
fast as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from phalanx.models.status import EpochState
from phalanx.operator.planner import Observed
from phalanx.operator.planner.config import PlannerConfig
from phalanx.operator.planner.congestion import (
    LateAcknowledgements,
    acknowledged,
    assignment_out,
)
from tests.unit.planner.builders import at, job, step
from tests.unit.planner.inplace_builders import (
    restarted_by_a_collective_failure,
    started_epoch_2,
)
from tests.unit.planner.test_startup import renewing, st, started

CONFIG = PlannerConfig(assignment_ack_seconds=10, assignment_settle_seconds=2)


def late_at(when: float | None) -> datetime | None:
    return at(when) if when is not None else None


def test_no_agent_is_unresponsive_while_other_epochs_acknowledgements_arrive_late() -> None:
    """Epoch 2 began at t=20 and none of its agents answered: at the ack timeout (t=30) no pod
    is replaced while another job's acknowledgement came late within the settle time; once they
    stop coming, or at six times the timeout (t=80), the silent ones are."""
    j, gang = restarted_by_a_collective_failure(CONFIG)
    silent = tuple(gang)
    held, plan = step(j, Observed(pods=silent, late_acks_at=at(30)), at(30.5), CONFIG)
    assert st(held).epoch == 2, (
        "acknowledgements are arriving late elsewhere: the channel is behind"
    )
    assert plan.requeue_after == pytest.approx(2.0), "it looks again after the settle time"

    stopped, _ = step(held, Observed(pods=silent, late_acks_at=at(30)), at(32.5), CONFIG)
    assert st(stopped).epoch == 3, "no late acknowledgement for the settle time: they are late"
    assert st(stopped).failures[-1].reason == "AgentUnresponsive"

    still, _ = step(held, Observed(pods=silent, late_acks_at=at(79.5)), at(79.9), CONFIG)
    assert st(still).epoch == 2
    bound, _ = step(still, Observed(pods=silent, late_acks_at=at(80)), at(80.1), CONFIG)
    assert st(bound).epoch == 3, "held at most six times the ack timeout"


def test_without_late_acknowledgements_an_agent_is_unresponsive_at_the_timeout() -> None:
    j, gang = restarted_by_a_collective_failure(CONFIG)
    j, _ = step(j, Observed(pods=tuple(gang), late_acks_at=at(25)), at(30.5), CONFIG)
    assert st(j).epoch == 3, "the last late one came 5.5 s ago: nothing holds the verdict"
    assert st(j).failures[-1].reason == "AgentUnresponsive"


def test_an_agent_silent_in_its_start_up_is_held_while_acknowledgements_arrive_late() -> None:
    j = job()
    j, _ = step(j, Observed(), at(0))
    j = started(j, 1, 4, 1)
    quiet = tuple(renewing(1, 4, "loading", at(30), r3=("loading", at(2))))
    held, plan = step(j, Observed(pods=quiet, late_acks_at=at(29.5)), at(30), CONFIG)
    assert st(held).epoch == 1, "silent 28 s, past its 15 s, but the channel is behind"
    assert plan.requeue_after == pytest.approx(2.0)
    frozen, _ = step(held, Observed(pods=quiet, late_acks_at=at(25)), at(30), CONFIG)
    assert st(frozen).epoch == 2, "nothing late in the settle time: frozen"
    assert st(frozen).failures[-1].reason == "Hang"
    bound, _ = step(held, Observed(pods=quiet, late_acks_at=at(92)), at(92.1), CONFIG)
    assert st(bound).epoch == 2, "held at most six times the silence timeout (90 s)"


def test_an_acknowledgement_is_late_when_it_arrives_after_half_the_timeout() -> None:
    acks = LateAcknowledgements(ack_seconds=10, started=at(10))
    acks.seen("a", 2, 3, at(20), at(24))
    assert acks.last() is None, "arrived 4 s after the assignment went out: on time"
    acks.seen("a", 2, 3, at(20), at(27))
    assert acks.last() is None, "no new acknowledgement since the last count"
    acks.seen("a", 2, 4, at(20), at(27))
    assert acks.last() == at(27)
    acks.seen("b", 5, 1, at(30), at(36))
    assert acks.last() == at(36)
    acks.seen("b", 6, 1, at(40), at(41))
    assert acks.last() == at(36), "a new epoch counts from none; this one came on time"
    acks.seen("c", 1, 2, None, at(50))
    assert acks.last() == at(36), "no assignment out: nothing to be late for"
    acks.seen("d", 7, 4, at(5), at(100))
    assert acks.last() == at(36), (
        "an epoch older than the operator, seen first: its acknowledgements were in place"
    )
    acks.seen("e", 2, 4, at(90), at(100))
    assert acks.last() == at(100), "an epoch of the operator's time, seen first: they arrived"


def test_the_assignment_goes_out_after_the_backoff() -> None:
    epoch = EpochState(start_time=at(20))
    assert assignment_out(epoch) == at(20)
    assert assignment_out(epoch.model_copy(update={"restart_after": at(25)})) == at(25)
    assert assignment_out(epoch.model_copy(update={"restart_after": at(15)})) == at(20)
    assert assignment_out(EpochState()) is None


def test_only_an_agents_word_counts_as_an_acknowledgement() -> None:
    """Of epoch 2's four carried-over pods: two agents started it, one still runs epoch 1, one
    pod's machine is gone (no word since epoch 1): two acknowledgements."""
    j, gang = restarted_by_a_collective_failure(CONFIG)
    started_two = started_epoch_2(at(21), missing=3)[:2]
    still_one, gone = gang[2], replace(gang[3], phase="Unknown")
    observed = Observed(pods=(*started_two, still_one, gone))
    assert acknowledged(observed, 2, st(j).current) == 2
