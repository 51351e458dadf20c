"""data/parallel.py: worker processes leave stop signals to their parent, from their first
instruction on (a SIGTERM to the whole process group, as torchrun and systemd send it, must not
kill a worker that is still starting)."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import torch

from transformer_cli.data.parallel import as_helper_process, stop_signals_held
from transformer_cli.host.stop_signals import STOP_SIGNALS


def _report_signal_state(queue) -> None:
    """In a forked child: the stop signals' state at start, then after as_helper_process."""

    def state():
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        return [(s in blocked, signal.getsignal(s) == signal.SIG_IGN) for s in STOP_SIGNALS]

    at_start = state()
    as_helper_process()
    queue.put((at_start, state()))


def test_a_worker_forked_while_signals_are_held_starts_with_them_blocked_until_it_ignores_them():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with stop_signals_held():
        child = context.Process(target=_report_signal_state, args=(queue,))
        child.start()
        assert all(s in signal.pthread_sigmask(signal.SIG_BLOCK, []) for s in STOP_SIGNALS)
    at_start, helper = queue.get(timeout=30)
    child.join(30)
    # blocked: a group signal waits (a signal the parent already ignores, as SIGINT in a
    # background job of a non-interactive shell, stays ignored)
    assert at_start == [(True, signal.getsignal(s) == signal.SIG_IGN) for s in STOP_SIGNALS]
    assert helper == [(False, True)] * len(STOP_SIGNALS)  # then ignored, no longer blocked
    assert not any(s in signal.pthread_sigmask(signal.SIG_BLOCK, []) for s in STOP_SIGNALS)


def test_a_signal_that_arrives_while_held_reaches_this_process_when_the_block_ends():
    script = textwrap.dedent("""
        import os, signal
        from transformer_cli.data.parallel import stop_signals_held
        got = []
        signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
        with stop_signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM], got
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


class _Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i


def test_dataloader_workers_survive_a_group_sigterm_sent_as_they_start():
    """The parent holds SIGTERM while the DataLoader forks; the group SIGTERM arrives before any
    worker has run its init: the workers survive it (the parent's handler gets it) and finish."""
    script = textwrap.dedent("""
        import os, signal, torch
        from transformer_cli.data.parallel import as_helper_process, stop_signals_held
        from test_parallel import _Slow
        got = []
        signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
        loader = torch.utils.data.DataLoader(_Slow(), batch_size=None, num_workers=2,
                                             worker_init_fn=lambda _: as_helper_process())
        with stop_signals_held():
            batches = iter(loader)  # the workers are forked here
            os.killpg(0, signal.SIGTERM)  # to every process of the group, workers included
        assert sorted(batches) == [0, 1, 2, 3]
        assert got == [signal.SIGTERM], got
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, start_new_session=True
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _helper_in_a_child(forker: int) -> int:
    """The exit code of a forked child that runs as_helper_process() as if `forker` had forked
    it (3: it returned and went on)."""
    from transformer_cli.data import parallel

    recorded = parallel._forker
    parallel._forker = forker
    try:
        pid = os.fork()
        if pid == 0:
            try:
                as_helper_process()
            finally:
                os._exit(3)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        parallel._forker = recorded


def test_a_worker_whose_forker_died_before_it_started_exits_at_once():
    """The death signal is asked for after the fork: a parent killed in between sends none, so
    a worker whose parent is no longer the process that forked it exits (it would otherwise
    wait for work forever, holding the data's memory maps)."""
    assert _helper_in_a_child(os.getpid()) == 3  # its forker is its parent: it goes on
    assert _helper_in_a_child(os.getpid() + 1_000_000) == 0  # another forker: gone, exits
