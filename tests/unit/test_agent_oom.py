"""A worker the kernel's OOM killer picked is told apart from any other SIGKILL.

Covers: the count is read from cgroup v2's memory.events or cgroup v1's memory.oom_control
(whichever exists), None where neither does; a worker SIGKILLed while the pod's count grew makes
the gang's outcome OOM-killed (exit 74, an infrastructure code), one SIGKILLed with the count
unchanged stays a kill (137); the operator names exit 74 OOMKilled. Real worker processes; the
counter files are the test's (the kernel's would need a real OOM: the kind suite makes one).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from phalanx.agent import oom
from phalanx.agent.supervisor import Supervisor
from phalanx.agent.warm import Launcher
from phalanx.models import exits
from phalanx.models.conditions import FailureReason
from phalanx.operator.planner.classify import exit_reason

V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill {}\n"
V2 = "low 0\nhigh 0\nmax 3\noom 2\noom_kill {}\noom_group_kill 0\n"


def test_the_count_is_read_from_either_cgroup_version(tmp_path: Path) -> None:
    events, control = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    assert oom.oom_kills((events, control)) is None
    control.write_text(V1.format(5))
    assert oom.oom_kills((events, control)) == 5
    events.write_text(V2.format(2))
    assert oom.oom_kills((events, control)) == 2, "the first counter that exists"
    assert not oom.grew(None, (events, control)), "nothing to compare with"


def gang(tmp_path: Path, counter: Path) -> Supervisor:
    supervisor = Supervisor(Launcher(["sleep", "60"], warm=False), stop_grace_seconds=1,
                            oom_counters=(counter,))  # fmt: skip
    for rank in range(2):
        supervisor.spawn(dict(os.environ), rank, rank, tmp_path / f"error-{rank}")
    return supervisor


@pytest.mark.parametrize(("kills_after", "code"), [(1, exits.OOM_KILLED), (0, 137)])
def test_a_sigkill_while_the_oom_count_grew_is_an_oom_kill(
    tmp_path: Path, kills_after: int, code: int
) -> None:
    counter = tmp_path / "memory.oom_control"
    counter.write_text(V1.format(0))
    supervisor = gang(tmp_path, counter)
    counter.write_text(V1.format(kills_after))  # the kernel counts its kill, then delivers it
    os.kill(supervisor.workers[1].process.pid, signal.SIGKILL)
    outcome = supervisor.wait()
    assert outcome.code == code
    if code == exits.OOM_KILLED:
        assert "worker rank 1 killed by the kernel's OOM killer" in outcome.message
        assert code in exits.INFRASTRUCTURE_CODES
    else:
        assert outcome.message == "worker rank 1 killed by SIGKILL"


def test_the_operator_names_exit_74_oom_killed() -> None:
    assert exit_reason(exits.OOM_KILLED) == FailureReason.OOM_KILLED
    assert str(FailureReason.OOM_KILLED) == "OOMKilled", "Kubernetes' own word for it"
    assert exit_reason(137) == FailureReason.KILLED
