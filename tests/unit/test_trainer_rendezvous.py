"""A rank joins once rank 0's store listens, not after torch's connect back-off.

Covers: a rank other than 0 returns from `await_store` only once something listens at
MASTER_ADDR:MASTER_PORT (the listener sees its connection); rank 0 and a store the agent hosts
do not wait; a store that never comes is left to the process group's own timeout.
"""

from __future__ import annotations

import socket
import threading
from datetime import timedelta

import pytest

from phalanx.models import env
from phalanx.trainer import distributed

WAIT = timedelta(seconds=30)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank(monkeypatch: pytest.MonkeyPatch, rank: int, port: int, agent_store: bool = False) -> None:
    monkeypatch.setenv(env.RANK, str(rank))
    monkeypatch.setenv(env.MASTER_ADDR, "127.0.0.1")
    monkeypatch.setenv(env.MASTER_PORT, str(port))
    monkeypatch.setenv(env.TORCHELASTIC_USE_AGENT_STORE, str(agent_store))


def test_a_rank_waits_until_the_store_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    _rank(monkeypatch, 1, port)
    listening = threading.Event()
    accepted: list[bool] = []
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def serve_later() -> None:
        listening.wait(timeout=WAIT.total_seconds())
        server.bind(("127.0.0.1", port))
        server.listen()
        connection, _ = server.accept()
        connection.close()
        accepted.append(True)

    thread = threading.Thread(target=serve_later)
    thread.start()
    try:
        refused_first = True
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            refused_first = False
        except OSError:
            pass
        assert refused_first, "nothing listens before the store starts"
        threading.Timer(0.2, listening.set).start()
        distributed.await_store(WAIT)
        thread.join(timeout=WAIT.total_seconds())
        assert accepted == [True], "it returned after the store took its connection"
    finally:
        listening.set()
        server.close()


@pytest.mark.parametrize(("rank", "agent_store"), [(0, False), (1, True)])
def test_rank_zero_and_an_agents_store_do_not_wait(
    monkeypatch: pytest.MonkeyPatch, rank: int, agent_store: bool
) -> None:
    _rank(monkeypatch, rank, _free_port(), agent_store)
    distributed.await_store(timedelta(days=1))  # would never return if it polled


def test_a_store_that_never_comes_is_left_to_the_groups_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _rank(monkeypatch, 1, _free_port())
    distributed.await_store(timedelta(milliseconds=50))  # returns; init_process_group then fails
