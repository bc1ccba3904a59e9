"""`phalanx-agent [COMMAND...]`: the node pod's entrypoint.

Without a command it runs the reference trainer; with one (`phalanx-agent python train.py`) it
runs that command once per worker, with every variable torchrun gives its workers (RANK,
LOCAL_RANK, WORLD_SIZE, the group and role ranks, TORCHELASTIC_*; see `phalanx.models.env`), so
an unmodified torchrun-style script works. A `torchrun ... train.py` command runs its script so
too, the agent being the pod's launcher (see `torchrun`).

It starts the epoch its env describes. With an assignment channel (the run's assignment file
locally, the job's assignment Lease on a cluster) the pod outlives that epoch: when the operator
publishes a newer one, the agent stops its workers and starts the new epoch's with the rank it
was given, and a failure of its workers is reported, not a reason to exit; a standby pod
(PHALANX_STANDBY) waits, its fork server warm, until an epoch names it. Without a channel the
agent runs its one epoch and exits with the gang's outcome.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from phalanx.agent import lifeline, storage, torchrun
from phalanx.agent.channel import Assignments, Reports
from phalanx.agent.epoch_env import epoch_env, static_assignment
from phalanx.agent.liveness import Liveness, Renewals, tracks_phases
from phalanx.agent.peers import Epoch, PeerWatch
from phalanx.agent.pod_setup import (
    channel,
    heartbeat_sink,
    injected_path,
    memory_directory,
    write_termination_message,
)
from phalanx.agent.sinks import HeartbeatSink, read_heartbeat
from phalanx.agent.supervisor import POLL_SECONDS, STOPPED_SECONDS, Outcome, Supervisor
from phalanx.agent.warm import Launcher
from phalanx.agent.wire import Assignment, Report
from phalanx.models import env as contract
from phalanx.models import exits
from phalanx.models.vocabulary import AgentPhase, AgentState
from phalanx.pod import PodEnv

UTC = timezone.utc  # noqa: UP017 (datetime.UTC is Python 3.11+; the agent runs in any image)

HEARTBEAT_SECONDS = 2.0
"""Default heartbeat period; PHALANX_HEARTBEAT_SECONDS overrides it."""
REFERENCE_TRAINER = [sys.executable, "-m", "phalanx.trainer.train"]


@dataclass
class Gang:
    """This node's workers for one epoch, and the heartbeat they feed."""

    epoch: int
    supervisor: Supervisor
    progress: Path
    sink: HeartbeatSink | None
    period: float
    last_beat: float = 0.0

    def publish(self, force: bool = False) -> None:
        if self.sink is None or (not force and time.monotonic() - self.last_beat < self.period):
            return
        self.last_beat = time.monotonic()
        if (beat := read_heartbeat(self.progress, self.epoch)) is not None:
            try:
                self.sink.publish(beat)
            except Exception as error:  # a missed heartbeat must not kill training
                print(f"phalanx-agent: heartbeat not published: {error}", file=sys.stderr)


@dataclass
class Agent:
    """The node pod's agent: runs each epoch it is assigned, reports what happens."""

    name: str
    launcher: Launcher
    initial: Assignment | None
    """The epoch the pod's env describes; None for a standby pod."""
    assignments: Assignments | None
    reports: Reports | None
    """None without a channel: the agent runs one epoch and exits with its outcome."""
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    rundir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="phalanx-agent-")))
    memory: Path | None = field(default_factory=memory_directory)
    """Where this pod's workers keep their memory snapshots across epochs; removed at exit."""
    gang: Gang | None = None
    last_epoch: int = -1
    preempted: bool = False
    renewals: Renewals = field(init=False)
    peers: PeerWatch = field(init=False)
    _report_lock: threading.Lock = field(default_factory=threading.Lock)
    _last_report: Report | None = None

    def __post_init__(self) -> None:
        self.renewals = Renewals(self._renewal)
        self.peers = PeerWatch(self._silent_changed)

    @property
    def in_place(self) -> bool:
        return self.reports is not None

    def run(self) -> int:
        try:
            return self._run()
        finally:
            self._stop_gang()
            self.peers.stop()
            if self.memory is not None:
                shutil.rmtree(self.memory, ignore_errors=True)

    def _run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_sigterm)
        if self.initial is None:
            self.launcher.warm_up()
            self.report("standby")
        self._follow(self.initial)
        while True:
            if self.preempted:
                return self._stop_preempted()
            if self.assignments is not None:
                self._follow(self.assignments.current())
            if self.gang is not None:
                self.gang.publish()
                outcome = self.gang.supervisor.poll()
                if outcome is not None:
                    code = self._ended(outcome)
                    if code is not None:
                        return code
            time.sleep(POLL_SECONDS)

    def _follow(self, assignment: Assignment | None) -> None:
        """Start the newest epoch this pod belongs to; leave one it no longer belongs to."""
        if assignment is None or assignment.epoch <= self.last_epoch:
            return
        self.last_epoch = assignment.epoch
        self._stop_gang()
        rank = assignment.ranks.get(self.name)
        if rank is None:
            self.peers.stop()
            self.report("standby", assignment.epoch)
            return
        if self.in_place:  # the watch outlives a failed gang: a peer may fall silent after
            self.peers.follow(Epoch(assignment.epoch, rank, assignment.nodes,
                                    assignment.master_addr, assignment.master_port))  # fmt: skip
        self._start(assignment, rank)

    def _start(self, assignment: Assignment, node_rank: int) -> None:
        env = epoch_env(self.base_env, assignment, node_rank)
        pod = PodEnv.read(env)
        progress = self.rundir / f"progress-{assignment.epoch}.json"
        stopped = env.get(contract.PHALANX_HANG_TIMEOUT_SECONDS)
        supervisor = Supervisor(
            self.launcher,
            stop_grace_seconds=0 if self.in_place else 10,
            stopped_seconds=float(stopped) if stopped else STOPPED_SECONDS,
        )
        memory = (
            {}
            if self.memory is None
            else {contract.PHALANX_CHECKPOINT_MEMORY_DIR: str(self.memory)}
        )
        period = float(env.get(contract.PHALANX_HEARTBEAT_SECONDS, HEARTBEAT_SECONDS))
        worker_envs = [pod.worker_env(local_rank) for local_rank in range(pod.nproc_per_node)]
        phase_files = [
            self.rundir / f"phase-{assignment.epoch}-{e[contract.RANK]}" for e in worker_envs
        ]
        for path in phase_files:
            path.unlink(missing_ok=True)
        liveness = Liveness(phase_files, tracks_phases(self.launcher.argv), period)
        self.renewals.follow(assignment.epoch, liveness, datetime.now(UTC))
        pairs = zip(worker_envs, phase_files)  # noqa: B905 (strict= is Python 3.10+; equal lengths)
        for local_rank, (worker_env, phase_file) in enumerate(pairs):
            rank = int(worker_env[contract.RANK])
            error_file = self.rundir / f"error-{rank}"
            supervisor.spawn(
                {
                    **env,
                    **pod.launcher_env(env),
                    **worker_env,
                    contract.PHALANX_PROGRESS_FILE: str(progress),
                    contract.PHALANX_SPAWNED_AT: f"{time.time():.3f}",
                    contract.PHALANX_PHASE_FILE: str(phase_file),
                    **memory,
                    **injected_path(env),
                },
                local_rank,
                rank,
                error_file,
            )
        self.gang = Gang(assignment.epoch, supervisor, progress, heartbeat_sink(pod), period)
        self.renewals.workers({str(w.rank): w.process.pid for w in supervisor.workers})

    def _renewal(
        self, epoch: int, phase: AgentPhase, since: datetime, every: float, workers: dict[str, int]
    ) -> None:
        """Say that this pod is alive, and in which phase (from the renewals' thread)."""
        self.report(
            "running", epoch, workers=workers, phase=phase, since=since, renew_seconds=every
        )

    def _ended(self, outcome: Outcome) -> int | None:
        """The gang ended: the exit code, or None when the agent waits for the next epoch."""
        assert self.gang is not None
        self.renewals.stop()
        self.gang.publish(force=True)
        epoch, self.gang = self.gang.epoch, None
        if outcome.code == exits.OK:
            self.report("succeeded", epoch)
            return exits.OK
        print(
            f"phalanx-agent: {outcome.message} (exit {outcome.code})", file=sys.stderr, flush=True
        )
        if not self.in_place:
            write_termination_message(outcome.message)
            return outcome.code
        failed_at = datetime.fromtimestamp(outcome.failed_at or time.time(), UTC)
        self.peers.corroborate()  # a peer quiet since is likely why
        self.report("failed", epoch, outcome.code, outcome.message, failed_at)
        return None

    def _stop_gang(self) -> None:
        self.renewals.stop()
        if self.gang is not None:
            self.gang.supervisor.kill()
            self.gang = None

    def _on_sigterm(self, *_: object) -> None:
        self.preempted = True
        if self.gang is not None:
            self.gang.supervisor.signal_all(signal.SIGTERM)  # workers checkpoint, then exit

    def _stop_preempted(self) -> int:
        """SIGTERM (pod deleted, node drained): workers checkpoint and stop within the grace."""
        message = "stopped (SIGTERM) while standing by"
        if self.gang is not None:
            self.gang.supervisor.wait()
            self.gang.publish(force=True)
            message = "preempted (SIGTERM): workers checkpointed and stopped"
        write_termination_message(message)
        print(f"phalanx-agent: {message}", file=sys.stderr, flush=True)
        return exits.SIGNAL_BASE + signal.SIGTERM

    def report(
        self,
        state: AgentState,
        epoch: int = 0,
        code: int | None = None,
        message: str | None = None,
        failed_at: datetime | None = None,
        workers: dict[str, int] | None = None,
        phase: AgentPhase | None = None,
        since: datetime | None = None,
        renew_seconds: float | None = None,
    ) -> None:
        """Publish the pod's state; a renewal (`phase` given) keeps the state's start `since`
        as its time and stamps `renewed`."""
        if self.reports is None:
            return
        now = datetime.now(UTC)
        report = Report(
            pod=self.name, state=state, epoch=epoch, exit_code=code, message=message,
            time=since or now, failed_at=failed_at, workers=workers or {}, phase=phase,
            renewed=now if phase is not None else None, renew_seconds=renew_seconds,
            silent_nodes=self.peers.silent() if state in ("running", "failed") else {},
        )  # fmt: skip
        self._publish(report)

    def _silent_changed(self, silent: dict[int, float]) -> None:
        """The peer watch found a peer silent (or heard it again): say so at once, in the state
        last reported (from the watch's thread)."""
        last = self._last_report
        if (
            last is not None
            and last.epoch == self.last_epoch
            and last.state in ("running", "failed")
        ):
            self._publish(dataclasses.replace(last, silent_nodes=silent))

    def _publish(self, report: Report) -> None:
        assert self.reports is not None
        try:
            with self._report_lock:  # the renewals' and the peer watch's threads report too
                self._last_report = report
                self.reports.publish(report)
        except Exception as error:  # the operator then sees the pod as it is, without details
            print(f"phalanx-agent: state not reported: {error}", file=sys.stderr, flush=True)


def build(command: list[str]) -> Agent:
    """The agent for this pod: its env's epoch (unless it stands by) and its channel."""
    name = os.environ.get(contract.PHALANX_POD_NAME) or os.environ.get("HOSTNAME", "agent")
    standby = os.environ.get(contract.PHALANX_STANDBY) == "1"
    initial = None if standby else static_assignment(PodEnv.read(), name)
    found = channel(name)
    if found is None:
        if initial is None:
            raise SystemExit("phalanx-agent: a standby pod needs an assignment channel")
        return Agent(name, Launcher(command), initial, None, None)
    return Agent(name, Launcher(command), initial, *found)


def main(argv: list[str] | None = None) -> int:
    if parent := os.environ.pop(contract.PHALANX_PARENT_PID, None):
        # Started by `phalanx run`: die with it, even SIGKILLed (not in a pod: PID 1 there).
        lifeline.die_with_parent()
        lifeline.exit_if_gone(int(parent))
    if problem := storage.unavailable(os.environ.get(contract.PHALANX_CHECKPOINT_URL)):
        print(f"phalanx-agent: {problem}", file=sys.stderr, flush=True)
        write_termination_message(problem)
        return exits.STORAGE_UNAVAILABLE
    command = (argv if argv is not None else sys.argv[1:]) or REFERENCE_TRAINER
    return build(torchrun.unwrap(command)).run()


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
