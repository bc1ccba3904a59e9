"""The agents' peer watch, over real UDP sockets on this machine (the periods shortened).

Covers: node rank 0's agent finds a peer silent once its pings stop (a frozen machine), and
says so once, not at every check, sooner once its own workers failed; node ranks 1 and 2 find node rank 0 silent once its answers
stop, and node rank 3 does not report it (two reporters are enough); a peer that never spoke
is not silent (a slow start is the start-up timeouts' business); pings of another epoch do not
count; a peer heard again is no longer silent; the report the agent publishes carries it.
"""

from __future__ import annotations

import queue
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from phalanx.agent.peers import CORROBORATED_SECONDS, Epoch, PeerWatch, decode, encode
from phalanx.agent.wire import Report
from phalanx.models.assignment import AgentReport

PING = 0.05
SILENT = 0.4


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def heard(agent: Watched, ranks: set[int], timeout: float = 5.0) -> None:
    """Wait until `agent` has heard these node ranks in the epoch (a peer is found silent only
    after it spoke)."""
    deadline = time.monotonic() + timeout
    while not ranks <= agent.watch.heard():
        assert time.monotonic() < deadline, f"heard {agent.watch.heard()}, not {ranks}"
        time.sleep(PING / 5)


class Watched:
    """One agent's watch and what it said."""

    def __init__(self) -> None:
        self.said: queue.Queue[dict[int, float]] = queue.Queue()
        self.watch = PeerWatch(self.said.put, ping_seconds=PING, silent_seconds=SILENT)

    def next_word(self, timeout: float = 5.0) -> dict[int, float]:
        return self.said.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        try:
            self.said.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def gang() -> Iterator[tuple[list[Watched], int]]:
    """Four agents of epoch 3, node rank 0 at 127.0.0.1 on a free port."""
    port = free_udp_port()
    agents = [Watched() for _ in range(4)]
    for rank, agent in enumerate(agents):
        agent.watch.follow(Epoch(3, rank, 4, "127.0.0.1", port))
    yield agents, port
    for agent in agents:
        agent.watch.stop()


def test_a_peer_whose_pings_stop_is_found_silent_by_node_rank_0_once(
    gang: tuple[list[Watched], int],
) -> None:
    agents, _ = gang
    heard(agents[0], {1, 2, 3})
    assert agents[0].quiet(3 * SILENT), "all ping: nobody is silent"
    stopped = time.monotonic()
    agents[2].watch.stop()  # its machine freezes: no more pings
    word = agents[0].next_word()
    assert list(word) == [2]
    assert SILENT <= word[2] <= time.monotonic() - stopped + PING
    assert agents[0].watch.silent().keys() == {2}
    assert agents[0].quiet(3 * SILENT), "said once, not at every check"


def test_once_its_own_workers_failed_an_agent_finds_a_quiet_peer_sooner() -> None:
    """A broken collective corroborates a quiet peer: CORROBORATED_SECONDS, not the full wait."""
    port = free_udp_port()
    rank0, rank1 = Watched(), Watched()
    rank0.watch = PeerWatch(
        rank0.said.put, ping_seconds=PING, silent_seconds=3 * CORROBORATED_SECONDS
    )
    rank0.watch.follow(Epoch(2, 0, 2, "127.0.0.1", port))
    rank1.watch.follow(Epoch(2, 1, 2, "127.0.0.1", port))
    try:
        heard(rank0, {1})
        rank1.watch.stop()
        rank0.watch.corroborate()
        stopped = time.monotonic()
        assert list(rank0.next_word(timeout=3 * CORROBORATED_SECONDS)) == [1]
        assert time.monotonic() - stopped < 2 * CORROBORATED_SECONDS
    finally:
        rank0.watch.stop()


def test_node_rank_0_silent_is_found_by_ranks_1_and_2_only(
    gang: tuple[list[Watched], int],
) -> None:
    agents, _ = gang
    heard(agents[0], {1, 2, 3})
    for agent in agents[1:3]:
        heard(agent, {0})
    agents[0].watch.stop()  # node rank 0 stops answering
    assert list(agents[1].next_word()) == [0]
    assert list(agents[2].next_word()) == [0]
    assert agents[3].quiet(2 * SILENT), "rank 3 leaves the word to ranks 1 and 2"
    assert agents[3].watch.silent() == {}


def test_a_peer_that_never_spoke_is_not_silent() -> None:
    port = free_udp_port()
    rank0 = Watched()
    rank0.watch.follow(Epoch(1, 0, 3, "127.0.0.1", port))  # ranks 1 and 2 never start
    try:
        assert rank0.quiet(3 * SILENT)
    finally:
        rank0.watch.stop()


def test_pings_of_another_epoch_do_not_count_and_a_peer_heard_again_is_not_silent() -> None:
    port = free_udp_port()
    rank0 = Watched()
    rank0.watch.follow(Epoch(5, 0, 2, "127.0.0.1", port))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.settimeout(PING)
        assert answered(peer, port) == (5, 0), "node rank 0 answers a ping of its epoch"
        deadline = time.monotonic() + 2 * SILENT
        while time.monotonic() < deadline:  # a straggler of epoch 4 goes on pinging
            peer.sendto(encode(4, 1), ("127.0.0.1", port))
            time.sleep(PING)
        assert list(rank0.next_word(timeout=0)) == [1]
        peer.sendto(encode(5, 1), ("127.0.0.1", port))
        assert rank0.next_word() == {}, "heard again: no longer silent"
    rank0.watch.stop()


def answered(peer: socket.socket, port: int) -> tuple[int, int] | None:
    """Ping as node rank 1 of epoch 5 until node rank 0 answers (its socket may not be bound
    yet), for 5 s at most."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        peer.sendto(encode(5, 1), ("127.0.0.1", port))
        try:
            return decode(peer.recv(64))
        except TimeoutError:
            continue
    return None


def test_a_report_carries_the_silent_peers_to_the_operator() -> None:
    report = Report(pod="j-3-0", state="running", time=datetime.now(UTC), epoch=3,
                    silent_nodes={2: 4.1})  # fmt: skip
    assert AgentReport.model_validate_json(report.to_json()).silent_nodes == {2: 4.1}
