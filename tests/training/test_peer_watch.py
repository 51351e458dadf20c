"""The peer watch: a rank whose peer on the same machine is gone without leaving in order
ends itself with the peer-lost line; one that left in order is let be."""

import os
import subprocess
import sys
import threading
import time

import torch.distributed as dist

from transformer_cli.training.peer_watch import Peer, PeerWatch, alive, left_key


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_alive_tells_a_running_process_from_a_zombie_and_a_reaped_one():
    assert alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while alive(child.pid) and time.monotonic() < deadline:  # exits, not yet reaped: a zombie
        time.sleep(0.02)
    assert not alive(child.pid)
    child.wait()
    assert not alive(child.pid)


def _watch(store: dist.Store, peer: subprocess.Popen) -> tuple[PeerWatch, list[str], threading.Event]:
    lost: list[str] = []
    called = threading.Event()

    def on_lost(message: str) -> None:
        lost.append(message)
        called.set()

    watch = PeerWatch(store, 0, [Peer(1, "here", peer.pid)], on_lost, grace_s=0.5)
    watch.start()
    return watch, lost, called


def test_a_peer_killed_without_leaving_ends_the_rank_with_one_line():
    peer = _sleeper()
    watch, lost, called = _watch(dist.HashStore(), peer)
    try:
        assert not called.wait(1.0)  # alive: nothing happens
        peer.kill()
        peer.wait()
        assert called.wait(10)
    finally:
        watch.leave(in_order=False)
    assert lost == [
        f"rank 0: another training process stopped or crashed (rank 1, process {peer.pid}, is gone); "
        "the last saved state is kept: run the same command to resume"
    ]


def test_a_peer_that_left_in_order_is_let_be_and_leaving_says_so():
    store = dist.HashStore()
    peer = _sleeper()
    watch, lost, called = _watch(store, peer)
    try:
        store.set(left_key(1), "1")  # what the peer's shutdown_distributed(in_order=True) sets
        peer.kill()
        peer.wait()
        assert not called.wait(2.0)
    finally:
        watch.leave(in_order=True)
    assert lost == []
    assert store.check([left_key(0)])  # this rank told the others in turn
