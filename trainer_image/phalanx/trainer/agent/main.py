"""`phalanx-agent [COMMAND...]`: the node pod's entrypoint.

Without a command it runs the reference trainer; with one (`phalanx-agent python train.py`) it
runs that command once per worker, with RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE set, so
an unmodified torchrun-style script works.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from phalanx.models import env as contract
from phalanx.models import exits
from phalanx.trainer.agent.sinks import FileSink, HeartbeatSink, LeaseSink, read_heartbeat
from phalanx.trainer.agent.supervisor import Supervisor
from phalanx.trainer.contract import PodEnv
from phalanx.trainer.distributed import ERROR_FILE_ENV
from phalanx.trainer.progress import PROGRESS_FILE_ENV

HEARTBEAT_FILE_ENV = contract.PHALANX_HEARTBEAT_FILE
TERMINATION_LOG_ENV = contract.PHALANX_TERMINATION_LOG
HEARTBEAT_SECONDS = 2.0
"""Default heartbeat period; PHALANX_HEARTBEAT_SECONDS overrides it."""
REFERENCE_TRAINER = [sys.executable, "-m", "phalanx.trainer.train"]


def heartbeat_sink(pod: PodEnv) -> HeartbeatSink | None:
    """Node rank 0 publishes; to a file when asked (local), else to the job's Lease."""
    if pod.node_rank != 0:
        return None
    if path := os.environ.get(HEARTBEAT_FILE_ENV):
        return FileSink(Path(path))
    if pod.heartbeat_lease and pod.namespace and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return LeaseSink(pod.namespace, pod.heartbeat_lease, os.environ.get("HOSTNAME", "agent"))
    return None


def write_termination_message(message: str) -> None:
    path = Path(os.environ.get(TERMINATION_LOG_ENV, "/dev/termination-log"))
    with contextlib.suppress(OSError):  # not in a pod: the message is on stderr too
        path.write_text(message[:4000])


def main(argv: list[str] | None = None) -> int:
    command = (argv if argv is not None else sys.argv[1:]) or REFERENCE_TRAINER
    pod = PodEnv()
    rundir = Path(tempfile.mkdtemp(prefix="phalanx-agent-"))
    progress = rundir / "progress.json"
    supervisor = Supervisor()
    for local_rank in range(pod.nproc_per_node):
        worker_env = pod.worker_env(local_rank)
        error_file = rundir / f"error-{worker_env['RANK']}"
        env = {
            **os.environ,
            **worker_env,
            ERROR_FILE_ENV: str(error_file),
            PROGRESS_FILE_ENV: str(progress),
        }
        supervisor.spawn(command, env, local_rank, int(worker_env["RANK"]), error_file)

    preempted = False

    def on_sigterm(*_: object) -> None:
        nonlocal preempted
        preempted = True
        supervisor.signal_all(signal.SIGTERM)  # workers checkpoint, then exit

    signal.signal(signal.SIGTERM, on_sigterm)
    sink = heartbeat_sink(pod)
    period = float(os.environ.get(contract.PHALANX_HEARTBEAT_SECONDS, HEARTBEAT_SECONDS))
    last_beat = 0.0

    def publish() -> None:
        nonlocal last_beat
        if sink is None or time.monotonic() - last_beat < period:
            return
        last_beat = time.monotonic()
        if (beat := read_heartbeat(progress)) is not None:
            try:
                sink.publish(beat)
            except Exception as error:  # a missed heartbeat must not kill training
                print(f"phalanx-agent: heartbeat not published: {error}", file=sys.stderr)

    outcome = supervisor.wait(publish)
    last_beat = 0.0
    publish()
    if preempted:
        outcome.code = exits.SIGNAL_BASE + signal.SIGTERM
        outcome.message = "preempted (SIGTERM): workers checkpointed and stopped"
    if outcome.code != exits.OK:
        write_termination_message(outcome.message)
        print(
            f"phalanx-agent: {outcome.message} (exit {outcome.code})", file=sys.stderr, flush=True
        )
    return outcome.code


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
