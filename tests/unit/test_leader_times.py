"""Leader election's times: the holder must stop acting (renew deadline) before anyone else may
start (the Lease's duration), and renew more often than that; settings derive them from the one
duration a user sets."""

from __future__ import annotations

import pytest

from phalanx.operator.cluster.leader import ElectionTimes
from phalanx.operator.settings import OperatorSettings


def test_the_renew_deadline_comes_before_the_lease_runs_out() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        ElectionTimes(lease=5, renew_deadline=5, retry=1)
    with pytest.raises(ValueError, match="retry"):
        ElectionTimes(lease=10, renew_deadline=2, retry=2)


@pytest.mark.parametrize(("lease", "deadline", "retry"), [(10, 7, 1), (2, 1.4, 0.4), (60, 42, 1)])
def test_settings_derive_the_times_from_the_lease(
    lease: float, deadline: float, retry: float
) -> None:
    times = OperatorSettings(leader_lease_seconds=lease).election_times()
    assert (times.lease, times.renew_deadline, times.retry) == pytest.approx(
        (lease, deadline, retry)
    )


def test_a_lease_too_short_to_renew_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="leader_lease_seconds"):
        OperatorSettings(leader_lease_seconds=1)
