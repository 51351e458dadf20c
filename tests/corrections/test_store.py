"""corrections/store.py: the append-only log every writer shares: durable at return, safe for
concurrent processes (a per-client cap holds across them), a writer's cut-short line never read
and removed by the next, a full disk one line with nothing half-written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from helpers import on_a_small_disk

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import guarded
from transformer_cli.corrections.store import Correction, CorrectionStore

WRITER = """
import sys
from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.guards import guarded
from transformer_cli.corrections.store import Correction, CorrectionStore
store, who = CorrectionStore(sys.argv[1]), sys.argv[2]
check = guarded(CorrectionsConfig(store=sys.argv[1], per_client_per_day=50))
for i in range(40):
    store.add([Correction(f"Satz {who} {i} .", f"Sentence {who} {i} .", client="shared")], check)
"""


def test_decisions_are_the_last_word_and_a_cut_short_line_is_never_read(tmp_path):
    store = CorrectionStore(tmp_path / "s")
    a, b = Correction("Ein Hund .", "A dog ."), Correction("Eine Katze .", "A cat .", status="held")
    store.add([a, b])
    assert store.decide([b.id, "nope"], "accepted") == ["nope"]  # all or nothing
    assert [c.status for c in CorrectionStore(tmp_path / "s").corrections()] == ["accepted", "held"]
    assert store.decide([b.id], "accepted") == [] and store.decide([a.id], "rejected") == []
    with open(store.path, "ab") as f:
        f.write(b'{"id": "cut", "sou')  # a writer killed mid-line
    fresh = CorrectionStore(tmp_path / "s")
    assert [(c.id, c.status) for c in fresh.corrections()] == [(a.id, "rejected"), (b.id, "accepted")]
    c = Correction("Ein Haus .", "A house .")
    fresh.add([c])  # the next writer cuts the broken line first
    lines = store.path.read_text().splitlines()
    assert all(json.loads(line) for line in lines) and json.loads(lines[-1])["id"] == c.id


def test_three_processes_append_at_once_and_one_cap_holds_across_them(tmp_path):
    folder = tmp_path / "s"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder), who], stderr=subprocess.PIPE, text=True)
        for who in "abc"
    ]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read() if p.stderr else ""
    found = CorrectionStore(folder).corrections()
    assert len(found) == 120 and len({c.id for c in found}) == 120
    assert sum(c.status == "accepted" for c in found) == 50  # the client's day, exactly
    assert {tuple(c.reasons) for c in found if c.status == "held"} == {
        ("the client's 50 corrections of the day are accepted already",)
    }
    check = guarded(CorrectionsConfig(store=str(folder), per_client_per_day=50))
    (late,) = CorrectionStore(folder).add([Correction("Noch einer .", "One more .", client="shared")], check)
    assert late.status == "held"


FULL_DISK = """
import sys
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.errors import TfmError
store = CorrectionStore(sys.argv[1])
n = 0
try:
    while True:
        store.add([Correction("Ein Satz .", "x" * 3000)])
        n += 1
except TfmError as e:
    print(e)
print(len(CorrectionStore(sys.argv[1]).corrections()) == n, n > 0)
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare: no private mount namespaces here")
def test_a_full_disk_is_one_line_naming_the_log_and_keeps_every_whole_record(tmp_path):
    error, counts = on_a_small_disk(tmp_path, "128k", FULL_DISK, "s")
    assert error == f"cannot store corrections in {tmp_path}/disk/s/corrections.jsonl: no space left on device"
    assert counts == "True True"
