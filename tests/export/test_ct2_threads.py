"""Thread settings reach CTranslate2: `threads` (else torch's number of threads) becomes the
export's intra-op threads. ctranslate2.Translator does not report its thread count, so the
test counts the process's threads: a translator adds one worker thread, and its first batch
starts the worker's OpenMP team, intra_threads - 1 more."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ct2_export, untrained_checkpoint

# In a fresh process: no other translators come or go while threads are counted, and torch's
# own thread pool is started (by a matmul) before each count.
COUNT = r"""
import json, os, sys, time, torch
from transformer_cli.api import open_backend

def settled():
    # The process's thread count once it has not changed for 0.3 s (threads that a busy
    # machine starts late are counted with the translator that started them).
    count, since = len(os.listdir("/proc/self/task")), time.monotonic()
    while time.monotonic() - since < 0.3:
        time.sleep(0.02)
        now = len(os.listdir("/proc/self/task"))
        if now != count:
            count, since = now, time.monotonic()
    return count

def threads_added(threads):
    torch.ones(256, 256) @ torch.ones(256, 256)
    before = settled()
    backend = open_backend(sys.argv[1], "cpu", threads=threads)
    backend.translate(["Ein Mann sieht einen Ball."] * 4)
    kept.append(backend)  # alive while the next ones are counted
    return settled() - before

kept = []
added = {"1": threads_added(1), "3": threads_added(3)}
torch.set_num_threads(2)
added["torch's 2"] = threads_added(None)
print(json.dumps(added))
"""


def test_threads_reach_ctranslate2(tmp_path):
    export = tmp_path / "export"
    ct2_export(untrained_checkpoint(tmp_path / "untrained.pt"), export)
    r = subprocess.run([sys.executable, "-c", COUNT, str(export)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"1": 1, "3": 3, "torch's 2": 2}
