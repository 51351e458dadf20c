"""training/distributed.py: without torchrun's variables every collective is a no-op in one
process; Agreement's meeting steps follow the step rate; a last.pt of another world size and a
lost peer are one line each; a launcher's port already in use is named at once."""

from __future__ import annotations

import socket
import time

import pytest
import torch

from transformer_cli.errors import UsageError
from transformer_cli.training.distributed import (
    Agreement,
    DistContext,
    PeerLost,
    check_same_world_size,
    init_distributed,
    peer_lost,
)


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic, moved by the test."""

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    c = Clock()
    monkeypatch.setattr(time, "monotonic", c)
    return c


def test_one_process_is_a_world_of_one(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ctx, device = init_distributed(torch.device("cpu"))
    assert ctx == DistContext() and device == torch.device("cpu")
    assert not ctx.enabled and ctx.is_main
    t = torch.tensor([3.0])
    assert ctx.all_reduce_sum(t) is t and ctx.all_reduce_max(t).item() == 3.0
    assert ctx.all_gather_object({"a": 1}) == [{"a": 1}]
    ctx.barrier()


def test_agreement_interval_follows_the_step_rate(clock):
    a = Agreement(every_s=1.0, max_interval=1000)
    assert a.next_interval(1) == 1  # no rate yet
    clock.now += 0.5
    assert a.next_interval(11) == 20  # 10 steps in 0.5 s: 20 steps a second
    clock.now += 100.0
    assert a.next_interval(12) == 1  # slower than a second a step: meet at every step
    clock.now += 0.000001
    assert a.next_interval(100_012) == 1000  # capped
    a.schedule(40, 7)
    assert not a.due(46) and a.due(47) and a.count == 1


def test_a_last_pt_of_another_world_size_is_refused_in_one_line(tmp_path):
    check_same_world_size(tmp_path / "last.pt", 2, 2)
    with pytest.raises(UsageError) as caught:
        check_same_world_size(tmp_path / "last.pt", 2, 1)
    assert str(caught.value).startswith(f"{tmp_path / 'last.pt'} was written by 2 training process(es), this is 1")
    assert "--restart" in str(caught.value)


def test_a_collective_that_failed_for_a_lost_peer_is_one_line():
    two = DistContext(rank=1, world_size=2)
    lost = peer_lost(RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:1234\nmore"), two)
    assert isinstance(lost, PeerLost) and lost.exit_code == 1
    assert str(lost).startswith("rank 1: another training process stopped or crashed ([gloo] Connection closed")
    assert "\n" not in str(lost)
    assert peer_lost(RuntimeError("CUDA out of memory"), two) is None  # not a peer's failure
    assert peer_lost(RuntimeError("Connection reset by peer"), DistContext()) is None  # one process: no peers


def test_a_meeting_port_in_use_is_one_line(monkeypatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(port))
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
        with pytest.raises(UsageError, match=f"rank 0: cannot serve .* at 127.0.0.1:{port} .*the port is in use"):
            init_distributed(torch.device("cpu"), rendezvous_s=5)
        monkeypatch.setenv("MASTER_PORT", "http")
        with pytest.raises(UsageError, match="rank 0: MASTER_PORT must be a port number"):
            init_distributed(torch.device("cpu"), rendezvous_s=5)
