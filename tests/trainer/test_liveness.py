"""The agent's renewals: at once when its workers' phase changes, every period while it does not,
never once they all train; a program without phases renews as `untracked`, less often, until
every worker of the pod entered a phase (a script using phalanx.progress)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from harness.controlplane import wait_until
from phalanx.agent.liveness import (
    UNTRACKED_RENEW_SECONDS,
    Liveness,
    Renewals,
    tracks_phases,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_renewals_follow_the_least_advanced_worker_and_stop_once_all_train(tmp_path: Path) -> None:
    files = [tmp_path / "phase-1-0", tmp_path / "phase-1-1"]
    clock = Clock()
    live = Liveness(files, tracked=True, period=2.0, clock=clock)
    assert live.due() == "starting", "the first report is due at once"
    assert live.due() is None
    clock.now += 2.0
    assert live.due() == "starting", "renewed every period"
    files[0].write_text("loading")
    assert live.due() is None, "the other worker has not started: still starting"
    files[1].write_text("rendezvous")
    assert live.due() == "rendezvous", "a change is reported at once"
    files[1].write_text("first-step")
    assert live.due() == "loading"
    files[0].write_text("training")
    files[1].write_text("training")
    assert live.due() == "training"
    clock.now += 3600
    assert live.due() is None, "training: steps show that every rank lives"


def test_a_program_without_phases_renews_as_untracked_every_few_seconds(tmp_path: Path) -> None:
    clock = Clock()
    live = Liveness([tmp_path / "never-written"], tracked=False, period=2.0, clock=clock)
    assert live.renew_seconds == UNTRACKED_RENEW_SECONDS
    assert live.due() == "untracked"
    clock.now += 2.0
    assert live.due() is None
    clock.now += UNTRACKED_RENEW_SECONDS
    assert live.due() == "untracked"


def test_a_script_that_enters_phases_is_tracked_once_every_worker_did(tmp_path: Path) -> None:
    """A script using phalanx.progress: untracked at first (its workers import), then judged as
    the reference trainer is; renewals stop once all train, its steps being the proof."""
    files = [tmp_path / "phase-1-0", tmp_path / "phase-1-1"]
    clock = Clock()
    live = Liveness(files, tracked=False, period=2.0, clock=clock)
    assert live.due() == "untracked"
    files[0].write_text("rendezvous")
    clock.now += UNTRACKED_RENEW_SECONDS
    assert live.due() == "untracked", "one worker of two entered a phase: not yet tracked"
    files[1].write_text("loading")
    assert live.due() == "rendezvous", "every worker did: the least advanced, at once"
    assert live.renew_seconds == 2.0, "tracked: every period, not every 5 s"
    files[0].write_text("training")
    files[1].write_text("training")
    assert live.due() == "training"
    clock.now += 3600
    assert live.due() is None


def test_a_script_that_reports_from_rank_0_alone_stays_untracked(tmp_path: Path) -> None:
    """Its other workers never write a phase: "starting" forever would be wrong, so the agent
    goes on renewing as untracked."""
    files = [tmp_path / "phase-1-0", tmp_path / "phase-1-1"]
    files[0].write_text("training")
    clock = Clock()
    live = Liveness(files, tracked=False, period=2.0, clock=clock)
    assert live.due() == "untracked"
    clock.now += UNTRACKED_RENEW_SECONDS
    assert live.due() == "untracked"
    assert live.renew_seconds == UNTRACKED_RENEW_SECONDS


def test_only_the_reference_trainer_is_known_to_report_phases() -> None:
    assert tracks_phases(["python", "-m", "phalanx.trainer.train", "--steps", "5"])
    assert not tracks_phases(["python", "train.py"])
    assert not tracks_phases(["torchrun", "--nproc-per-node", "2", "train.py"])


def test_renewals_go_on_from_their_own_thread_until_stopped(tmp_path: Path) -> None:
    """The agent's loop may block (a cold fork server's first fork imports torch): the renewals
    must not, or a busy agent would read as a frozen one."""
    sent: list[tuple[int, str, dict[str, int]]] = []
    renewals = Renewals(lambda epoch, phase, _, __, workers: sent.append((epoch, phase, workers)))
    since = datetime.now(UTC)
    phase_file = tmp_path / "phase-3-0"
    renewals.follow(3, Liveness([phase_file], tracked=True, period=0.05), since)
    assert sent == [(3, "starting", {})], "the first report goes out before any worker starts"
    renewals.workers({"0": 1234})
    assert sent[-1] == (3, "starting", {"0": 1234}), "the pids go out at once"
    phase_file.write_text("loading")
    wait_until(lambda: sent[-1][1] == "loading", 10, "the phase change to be reported")
    count = len(sent)
    wait_until(lambda: len(sent) >= count + 2, 10, "two more renewals, with the loop idle")
    renewals.stop()
    count = len(sent)
    time.sleep(0.3)  # a stopped renewal must stay silent: six periods without a report
    assert len(sent) == count
