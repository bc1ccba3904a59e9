"""Silent peers: the agents of an epoch ping node rank 0's agent, and it answers, over UDP.

Why: a machine that freezes (power loss, a partition, a stuck kernel) closes no socket. Its
peers' collectives just wait, its kubelet stops posting, and Kubernetes marks the node NotReady
only after its grace period (40 s by default, ~50 s measured). Between agents the silence shows
in seconds: each agent pings node rank 0's agent every `PING_SECONDS`, which answers each ping;
a peer that spoke in this epoch and has not been heard for `SILENT_SECONDS` is silent (sooner,
`CORROBORATED_SECONDS`, once the finder's own workers failed: a broken collective corroborates
it). Node rank
0 finds silent peers from their pings; node ranks 1 and 2 find node rank 0 silent from its
answers. The finder says so in its report (a write only when the set changes), so the operator
decides on the word of a live peer, not on the absence of a write it may merely not have seen
(an API server that restarts, a slow watch).

Why UDP on the epoch's master port: the port is fresh each epoch (a straggler of an earlier
epoch cannot ping into a later one), every pod already reaches node rank 0 at that address, and
torch's rendezvous store listens on TCP there, not UDP. A peer that never spoke in an epoch is
not silent here: a pod that is slow to start is the start-up timeouts' business. Only the
standard library: the agent runs in any image with python3.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

PING_SECONDS = 0.5
"""How often each agent pings node rank 0's agent."""

SILENT_SECONDS = 4.0
"""A peer not heard from this long, after it spoke in the epoch, is silent: eight pings
missed. A busy agent still pings (its own thread), so only a frozen or cut-off machine stays
quiet."""

CORROBORATED_SECONDS = 2.0
"""Once this agent's own workers failed (a collective broke: a peer is likely gone), a peer
quiet this long is silent: four pings missed, and the restart need not wait the full
`SILENT_SECONDS` to leave a lost machine out."""

CONTACT_SECONDS = 0.1
"""How often an agent pings until node rank 0's agent first answers: only a peer heard in the
epoch can be found silent, and node rank 0's agent may bind its socket a moment after the
others' first ping (a freeze in the epoch's first second would otherwise go unheard)."""

REPORTERS = (1, 2)
"""Node ranks that report node rank 0's silence: two, in case one of them is frozen too; not
all, so that a lost rank 0 of a large job costs two writes, not one per pod."""

_MAGIC = "phalanx-peer"


@dataclass(frozen=True)
class Epoch:
    """Where this agent stands in an epoch: its node rank, the epoch's size, node rank 0."""

    epoch: int
    node_rank: int
    nodes: int
    address: str
    port: int


def encode(epoch: int, node_rank: int) -> bytes:
    return f"{_MAGIC} {epoch} {node_rank}".encode()


def decode(data: bytes) -> tuple[int, int] | None:
    """(epoch, node rank) of a ping or answer; None for anything else."""
    parts = data.decode("ascii", "replace").split()
    if len(parts) != 3 or parts[0] != _MAGIC or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return int(parts[1]), int(parts[2])


class PeerWatch:
    """One agent's side of the pings, for the epoch it follows. `on_change` gets the silent node
    ranks (rank -> seconds unheard) whenever that set changes, from the watch's thread."""

    def __init__(
        self,
        on_change: Callable[[dict[int, float]], None],
        ping_seconds: float = PING_SECONDS,
        silent_seconds: float = SILENT_SECONDS,
    ) -> None:
        self.on_change = on_change
        self.ping_seconds = ping_seconds
        self.silent_seconds = self.normal_silent_seconds = silent_seconds
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._silent: dict[int, float] = {}
        self._heard: dict[int, float] = {}

    def follow(self, epoch: Epoch) -> None:
        """Watch `epoch` from now on (an earlier epoch's watch ends)."""
        self.stop()
        self.silent_seconds = self.normal_silent_seconds
        if epoch.nodes < 2:
            return
        stop = threading.Event()
        with self._lock:
            self._stop, self._silent = stop, {}
        target = self._listen if epoch.node_rank == 0 else self._ping
        threading.Thread(target=target, args=(epoch, stop), name="peers", daemon=True).start()

    def corroborate(self) -> None:
        """This agent's workers failed: a peer quiet for `CORROBORATED_SECONDS` is silent, for
        the rest of the epoch."""
        self.silent_seconds = min(self.silent_seconds, CORROBORATED_SECONDS)

    def stop(self) -> None:
        with self._lock:
            if self._stop is not None:
                self._stop.set()
            self._stop, self._silent = None, {}

    def heard(self) -> set[int]:
        """Node ranks heard in the epoch so far (only they can be found silent)."""
        return set(self._heard)

    def silent(self) -> dict[int, float]:
        """Node ranks silent now, with how long they have been unheard (rounded to 0.1 s)."""
        with self._lock:
            return dict(self._silent)

    def _listen(self, epoch: Epoch, stop: threading.Event) -> None:
        """Node rank 0: note each peer's pings and answer them."""
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", epoch.port))
        except OSError as error:
            print(f"phalanx-agent: no peer pings in epoch {epoch.epoch}: {error}", file=sys.stderr)
            return
        sock.settimeout(0.2)
        heard: dict[int, float] = {}
        self._heard = heard
        with sock:
            while not stop.is_set():
                try:
                    data, sender = sock.recvfrom(64)
                except OSError:  # a timeout: nothing this time
                    data, sender = b"", None
                ping = decode(data) if data else None
                if ping is not None and ping[0] == epoch.epoch and 0 < ping[1] < epoch.nodes:
                    heard[ping[1]] = time.monotonic()
                    with contextlib.suppress(OSError):
                        sock.sendto(encode(epoch.epoch, 0), sender)
                self._update(heard, stop)

    def _ping(self, epoch: Epoch, stop: threading.Event) -> None:
        """Node rank > 0: ping node rank 0 every period; its answers show it is alive."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        heard: dict[int, float] = {}
        self._heard = heard
        due = 0.0
        with sock:
            while not stop.is_set():
                now = time.monotonic()
                if now >= due:  # often until node rank 0 first answers: see CONTACT_SECONDS
                    due = now + (
                        self.ping_seconds if heard else min(CONTACT_SECONDS, self.ping_seconds)
                    )
                    ping = encode(epoch.epoch, epoch.node_rank)
                    with contextlib.suppress(OSError):  # resolved each time: DNS may come late
                        sock.sendto(ping, (epoch.address, epoch.port))
                sock.settimeout(max(0.01, min(0.2, due - time.monotonic())))  # ping on time
                try:
                    answer = decode(sock.recv(64))
                except OSError:  # a timeout, or the port refused (ICMP): nothing heard
                    answer = None
                if answer == (epoch.epoch, 0):
                    heard[0] = time.monotonic()
                if epoch.node_rank in REPORTERS:
                    self._update(heard, stop)

    def _update(self, heard: dict[int, float], stop: threading.Event) -> None:
        now = time.monotonic()
        silent = {
            rank: round(now - last, 1)
            for rank, last in heard.items()
            if now - last >= self.silent_seconds
        }
        with self._lock:
            if stop.is_set() or silent.keys() == self._silent.keys():
                if not stop.is_set():
                    self._silent = silent
                return
            self._silent = silent
        self.on_change(silent)
