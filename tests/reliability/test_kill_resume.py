"""SIGKILL (or power loss) at random points, ten times in a row, then one run to the end.

The interrupted run must end with exactly the numbers of an uninterrupted one, every
checkpoint it leaves must load, and the published model must stay whole the whole time.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time

import torch
from helpers import run_tfm
from reliability.cron_helpers import Tfm, checkpoint_files, epoch_ends, progress, run_dir, temp_leftovers

from transformer_cli.checkpoint import read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.training.session import run_training

EPOCHS = 20
KILLS = 10


class PublishedWatcher(threading.Thread):
    """Loads published.pt every ~50 ms and records any moment it is missing or unreadable."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.loads, self.failures = path, 0, []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                read_payload(self.path)
                self.loads += 1
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                self.failures.append(f"{type(e).__name__}: {e}")
            self.stop.wait(0.05)


def test_sigkill_ten_times_then_finish_equals_an_uninterrupted_run(tmp_path, make_config, tfm_fork):
    killed_cfg, straight_cfg = (make_config(sub, epochs=1) for sub in ("killed", "straight"))
    run, straight = run_dir(killed_cfg), run_dir(straight_cfg)
    for cfg in (killed_cfg, straight_cfg):  # a model is published before the kills begin
        run_training(load_config(str(cfg)))
        assert (run_dir(cfg) / "published.pt").is_file()
    published_before = (run / "published.pt").read_bytes()
    # Raised epochs: the finished run continues. Checkpoints every 2 steps keep progress.
    overrides = ["--set", f"train.epochs={EPOCHS}", "--set", "train.checkpoint_every_steps=2", "--quiet"]
    command = ["train", "-c", str(killed_cfg), *overrides]

    # The uninterrupted reference, same overrides on its own copy, runs beside the kill loop.
    reference = Tfm("train", "-c", str(straight_cfg), *overrides, log_to=tmp_path / "straight.err", fresh=True)
    watcher = PublishedWatcher(run / "published.pt")
    watcher.start()
    rng = random.Random(20240607)
    outcomes, leftovers = [], set()
    window, steps_seen = 1.2, None  # seconds a kill may wait; the step the last kill left
    try:
        for i in range(KILLS):
            # Forked with tfm and torch already imported (tests/zygote.py).
            pid = tfm_fork.start(*command, log_to=tmp_path / f"kill{i}.err")
            # A random moment of the session: taking the lock, reading data and checkpoints,
            # training, writing checkpoints or metrics, validating, plotting, promoting. On a
            # machine too busy to save a step within the window, the window widens.
            time.sleep(rng.uniform(0.0, window))
            with contextlib.suppress(ProcessLookupError):  # it had already finished (and was reaped)
                os.kill(pid, signal.SIGKILL)
            code = tfm_fork.wait(pid)
            assert code in (-signal.SIGKILL, 0), (tmp_path / f"kill{i}.err").read_text()
            last = run / "last.pt"
            step = progress(last)["step"] if last.is_file() else None
            window = window * 1.5 if step == steps_seen else window
            steps_seen = step
            state = f"@{step}" if step is not None else " (no last.pt)"
            outcomes.append(("killed" if code else "done") + state)
            leftovers.update(p.name for p in temp_leftovers(run))
        final = run_tfm(*command, fresh=True)  # the next night's run, a fresh `python -m transformer_cli`
    finally:
        watcher.stop.set()
        watcher.join()
        try:
            reference.wait(120)
        finally:
            reference.proc.kill()  # only if it hangs: it has been reaped otherwise
    print(f"kills: {outcomes}; published.pt loaded {watcher.loads} times; temp files seen: {leftovers}")
    assert final.returncode == 0, final.stderr
    assert reference.wait() == 0, reference.stderr
    assert sum(o.startswith("killed") for o in outcomes) >= KILLS // 2, outcomes
    assert len({o for o in outcomes if o.startswith("killed@")}) >= 3, outcomes  # at varied points
    assert all("no last.pt" not in o for o in outcomes), outcomes  # last.pt was never missing

    # Same numbers as the uninterrupted run, epoch by epoch.
    got, want = epoch_ends(run), epoch_ends(straight)
    assert [r[0] for r in want] == [10 * (e + 1) for e in range(EPOCHS)]
    assert got == want
    # Every checkpoint left behind loads; temp files of interrupted writes were cleared.
    for path in checkpoint_files(run):
        read_payload(path)
    assert temp_leftovers(run) == []
    # published.pt was never missing nor partial; at the end the better model was promoted...
    assert watcher.failures == [] and watcher.loads > 50
    assert (run / "published.pt").read_bytes() != published_before
    assert read_payload(run / "published.pt")["sha256"] == read_payload(run / "best.pt")["sha256"]
    # ...and it holds exactly the weights the uninterrupted run published.
    mine, theirs = (read_payload(r / "published.pt")["state_dict"] for r in (run, straight))
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
