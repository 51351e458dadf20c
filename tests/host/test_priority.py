"""`train.priority` (transformer_cli/priority.py) applied to real processes: each setting in a
process of its own (a lowered priority cannot be raised again), read back from /proc and
ioprio_get, for the thread that applied it and one started before it. `tfm train` applying it
at its start: tests/reliability/test_shared_machine.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduling")

SCRIPT = """
import json, os, sys, threading
from pathlib import Path
from transformer_cli.host import priority
ready, done = threading.Event(), threading.Event()
def earlier():  # a thread that exists before the priority is applied
    global tid
    tid = threading.get_native_id()
    ready.set()
    done.wait()
t = threading.Thread(target=earlier)
t.start()
ready.wait()
priority.apply(sys.argv[1])
def state(tid):
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return [int(fields[16]), int(fields[38]), priority.io_priority(tid)]
later = []
t2 = threading.Thread(target=lambda: later.append(state(threading.get_native_id())))
t2.start(); t2.join()
print(json.dumps({"main": state(threading.get_native_id()), "earlier": state(tid), "later": later[0],
                  "described": priority.describe()}))
done.set()
"""


def applied(setting: str, nice: int = 0) -> dict:
    r = subprocess.run(
        ["nice", "-n", str(nice), sys.executable, "-c", SCRIPT, setting], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_setting_reaches_every_thread_and_the_ones_started_later():
    best_effort_7 = (2 << 13) | 7
    low, idle, normal = applied("low"), applied("idle"), applied("normal")
    for thread in ("main", "earlier", "later"):
        assert low[thread] == [10, os.SCHED_BATCH, best_effort_7]
        assert idle[thread] == [19, os.SCHED_IDLE, best_effort_7]
        assert normal[thread] == [0, os.SCHED_OTHER, 0]  # as started: nothing set
    assert low["described"] == "nice 10, SCHED_BATCH, I/O best-effort 7"
    assert idle["described"] == "nice 19, SCHED_IDLE, I/O best-effort 7"
    assert normal["described"] == "nice 0, SCHED_OTHER, I/O default"


def test_a_lower_priority_given_at_the_start_is_kept():
    assert applied("low", nice=15)["main"][0] == 15  # `nice -n 15 tfm train`: not raised to 10
