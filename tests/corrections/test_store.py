"""corrections/store.py: the append-only log every writer shares: durable at return, safe for
concurrent processes (a per-caller cap holds across them), a writer's cut-short line never read
and removed by the next, a full disk one line with nothing half-written, a damaged line skipped
and said once with its file and line, a log edited by hand read again."""

from __future__ import annotations

import json
import logging
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
    store.add([Correction(f"Satz {who} {i} .", f"Sentence {who} {i} .", client=f"{who}{i}", caller="shared")], check)
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
    """One caller's cap, whatever clients its corrections name."""
    folder = tmp_path / "s"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder), who], stderr=subprocess.PIPE, text=True)
        for who in "abc"
    ]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read() if p.stderr else ""
    found = CorrectionStore(folder).corrections()
    assert len(found) == 120 and len({c.id for c in found}) == 120
    assert sum(c.status == "accepted" for c in found) == 50  # the caller's day, exactly
    assert {tuple(c.reasons) for c in found if c.status == "held"} == {
        ("the caller's 50 corrections of the day are accepted already",)
    }
    check = guarded(CorrectionsConfig(store=str(folder), per_client_per_day=50))
    (late,) = CorrectionStore(folder).add([Correction("Noch einer .", "One more .", caller="shared")], check)
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


def damaged_log(store: CorrectionStore) -> tuple[Correction, Correction]:
    """A log of two good corrections and, between them, lines that hold none (lines 2-8)."""
    good, later = Correction("Ein Hund .", "A dog ."), Correction("Eine Katze .", "A cat .")
    store.add([good])
    record = json.dumps({**good.__dict__, "id": "fixed-by-hand", "source": "Ein Baum ."})
    with open(store.path, "a", encoding="utf-8") as f:
        f.write(record[:-1] + ",}\n")  # 2: a hand edit's trailing comma
        f.write("[1, 2]\n")  # 3: not an object
        f.write(json.dumps({"id": "n", "source": 5, "corrected": "Five ."}) + "\n")  # 4: a number as source
        f.write(json.dumps({"id": "m", "source": "Ein Haus ."}) + "\n")  # 5: no corrected
        f.write(json.dumps({"source": "Ein Boot .", "corrected": "A boat ."}) + "\n")  # 6: no id
        f.write(json.dumps({"id": good.id, "time": 1.0, "decision": "maybe"}) + "\n")  # 7: no such decision
        f.write('{"id": "t", "source": "Ein Zug .", "corrected": "A train .", "time": NaN}\n')  # 8: no time
    store.add([later])
    return good, later


def test_damaged_lines_are_skipped_and_said_once_each_naming_the_file_and_line(tmp_path, caplog):
    """A line that is not JSON, or JSON that is no record, once made every reader raise (a
    UsageError, or a TypeError deep in a reader): it is skipped, and said once, by the store."""
    good, later = damaged_log(CorrectionStore(tmp_path / "s"))
    store = CorrectionStore(tmp_path / "s")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfm"):
        assert [c.id for c in store.corrections()] == [good.id, later.id]
        store.add([Correction("Ein Haus .", "A house .")])  # reads what it appended, nothing again
        assert len(store.corrections()) == 3
    path = store.path
    assert [str(d) for d in store.damaged] == [
        f"{path}:2: not JSON (Expecting property name enclosed in double quotes, column {len(record_of(path, 2))})",
        f"{path}:3: not a JSON object (list)",
        f"{path}:4: a correction: source has the wrong type (int)",
        f"{path}:5: a correction has no corrected",
        f"{path}:6: a correction has no id",
        f"{path}:7: a decision: decision is 'maybe', not one of accepted, rejected",
        f"{path}:8: a correction: time is not a finite number",
    ]
    assert [r.getMessage() for r in caplog.records] == [f"warning: {d}; line skipped" for d in store.damaged]


def record_of(path, number: int) -> str:
    return path.read_text(encoding="utf-8").splitlines()[number - 1]


def test_a_log_edited_by_hand_is_read_again_from_its_start(tmp_path, caplog):
    """Skipping a damaged line must not leave a reader's place in the log behind a hand fix: the
    fixed line (shorter by its comma) is read, and what is appended after it is too."""
    store = CorrectionStore(tmp_path / "s")
    damaged_log(store)
    assert "fixed-by-hand" not in {c.id for c in store.corrections()}
    lines = store.path.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace(",}", "}")
    store.path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")  # in place, as editors may
    writer = CorrectionStore(tmp_path / "s")
    appended = Correction("Ein Haus .", "A house .")
    writer.add([appended])
    ids = [c.id for c in store.corrections()]
    assert "fixed-by-hand" in ids and ids[-1] == appended.id and len(store.damaged) == 6
