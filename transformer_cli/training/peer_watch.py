"""Each training process watches the others on its machine, so that a dead one stops the rest.

gloo does not always notice a peer that died: a rank whose send to a killed peer is still
pending waits for train.collective_timeout_min (torch's launcher SIGKILLs it after 30 s, and the
rank cannot honour the launcher's SIGTERM meanwhile: the signal waits for gloo to return). So
every rank checks, twice a second, that the processes of the other ranks on its machine are
still there. One that is gone without having said that it left in order (its run ended, or a
signal stopped every rank at the same step) ends this rank with the peer-lost line and exit 1,
after a grace period in which this rank's own collective may fail first and say so itself.
Ranks on other machines are left to gloo and the collective timeout.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist

# How often the other processes are looked at, and how long one may have been gone before this
# rank ends itself (its own collective usually fails within it, with the same line).
EVERY_S = 0.5
GRACE_S = 3.0


@dataclass(frozen=True)
class Peer:
    rank: int
    host: str
    pid: int


def left_key(rank: int) -> str:
    """The store key a rank sets when it leaves in order."""
    return f"tfm/left-in-order/{rank}"


def alive(pid: int) -> bool:
    """Whether process `pid` is running (a zombie, dead but not yet reaped, is not)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        # the state follows the command name, which is in parentheses and may hold spaces
        return stat.read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: whether a signal could be sent to it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


class PeerWatch:
    """A daemon thread watching `peers` (the other ranks on this machine) for rank `rank`;
    `on_lost(message)` ends the process when one is gone without leaving in order."""

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        peers: list[Peer],
        on_lost: Callable[[str], None],
        grace_s: float = GRACE_S,
    ):
        self.store, self.rank, self.peers, self.on_lost, self.grace_s = store, rank, peers, on_lost, grace_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tfm-peer-watch", daemon=True)

    def start(self) -> None:
        if self.peers:
            self._thread.start()

    def leave(self, in_order: bool) -> None:
        """Stop watching; `in_order`: tell the others that this rank's exit is no failure."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if in_order:
            try:
                self.store.set(left_key(self.rank), "1")
            except (RuntimeError, OSError):  # the store's server is gone: so is its rank
                pass

    def _watch(self) -> None:
        gone_since: dict[int, int] = {}  # rank -> the tick it was first seen gone
        left: set[int] = set()  # ranks that left in order
        tick = 0
        while not self._stop.wait(EVERY_S):
            tick += 1
            for peer in self.peers:
                if peer.rank in left or alive(peer.pid):
                    continue
                if self._left_in_order(peer):  # set before it exits, so seen once it is gone
                    left.add(peer.rank)
                    continue
                first = gone_since.setdefault(peer.rank, tick)
                if (tick - first) * EVERY_S >= self.grace_s and not self._stop.is_set():
                    self.on_lost(
                        f"rank {self.rank}: another training process stopped or crashed (rank "
                        f"{peer.rank}, process {peer.pid}, is gone); the last saved state is "
                        "kept: run the same command to resume"
                    )
                    return

    def _left_in_order(self, peer: Peer) -> bool:
        try:
            return bool(self.store.check([left_key(peer.rank)]))
        except (RuntimeError, OSError):  # the store's server (rank 0, or the launcher) is gone
            return False
