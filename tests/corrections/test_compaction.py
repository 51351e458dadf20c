"""CorrectionStore.compact (`tfm feedback compact`): the log rewritten as its current records,
atomically. Real processes: one compacts over and over and is SIGKILLed at random moments
(some between writing the new log and renaming it over the old, some after), while another
appends corrections and decisions and says each once it is acknowledged: afterwards every
acknowledged one is in the store as acknowledged, and a reader that followed the log through
the renames (another inode) holds what a fresh one reads."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

from helpers import run_tfm, write_config

from transformer_cli.corrections.store import Correction, CorrectionStore

COMPACTOR = """
import sys
from transformer_cli.corrections.store import CorrectionStore
store = CorrectionStore(sys.argv[1])
while True:
    store.compact()
"""
WRITER = """
import sys
from transformer_cli.corrections.store import Correction, CorrectionStore
store = CorrectionStore(sys.argv[1])
for i in range(10**6):
    (c,) = store.add([Correction(f"Satz {i} .", f"Sentence {i} .")])
    if i % 3 == 0:
        store.decide([c.id], "rejected")
    print(c.id, "rejected" if i % 3 == 0 else "accepted", flush=True)
"""


def acknowledged(out: str) -> dict[str, str]:
    """The writer's acknowledged corrections: id -> status (a line cut short by its kill left out)."""
    pairs = [line.split() for line in out.splitlines()]
    return {p[0]: p[1] for p in pairs if len(p) == 2 and len(p[0]) == 16 and p[1] in ("accepted", "rejected")}


def kill_compactions(folder, follower: CorrectionStore) -> tuple[int, int]:
    """Start and SIGKILL compactors until one was killed with its new log not yet renamed in and
    one had renamed its new log in; how many of each."""
    rng, cut, done = random.Random(0), 0, 0
    for _ in range(40):
        before = folder.joinpath("corrections.jsonl").stat().st_ino
        proc = subprocess.Popen([sys.executable, "-c", COMPACTOR, str(folder)])
        time.sleep(rng.uniform(0.2, 0.9))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        cut += any(folder.glob(".corrections.jsonl.*.tmp"))
        done += folder.joinpath("corrections.jsonl").stat().st_ino != before
        follower.refresh()
        if cut and done:
            break
    return cut, done


def test_a_compaction_killed_at_any_moment_loses_no_acknowledged_correction(tmp_path):
    folder = tmp_path / "s"
    store = CorrectionStore(folder)
    store.add([Correction(f"Ein Satz {i} .", f"A sentence {i} .") for i in range(20_000)])
    follower = CorrectionStore(folder)
    follower.refresh()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    try:
        early = "".join(writer.stdout.readline() for _ in range(25))  # under way before any compaction
        cut, done = kill_compactions(folder, follower)
    finally:
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate(30)
    out = early + out
    assert cut and done, (cut, done)
    acked = acknowledged(out)
    fresh = {c.id: c.status for c in CorrectionStore(folder).corrections()}
    assert len(acked) > 20 and all(fresh.get(i) == status for i, status in acked.items())
    assert {c.id: c.status for c in follower.corrections()} == fresh
    store.decide([next(iter(acked))], "rejected")
    fresh[next(iter(acked))] = "rejected"
    before, after = store.compact()
    assert after == len(fresh) < before and not any(folder.glob(".*.tmp"))  # decisions folded in, temps gone
    assert {c.id: c.status for c in CorrectionStore(folder).corrections()} == fresh


def test_feedback_compact_folds_decisions_in_and_keeps_damaged_lines(tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "fix.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    store = CorrectionStore(tmp_path / "store")
    kept, gone = store.add([Correction("Ein Hund .", "A dog ."), Correction("Eine Katze .", "A cat .")])
    store.decide([gone.id], "rejected")
    with open(store.path, "a", encoding="utf-8") as f:
        f.write("not a record\n")
    r = run_tfm("feedback", "compact", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert f"{store.path} compacted: 4 line(s) -> 3" in r.stderr
    assert store.path.read_text(encoding="utf-8").splitlines()[-1] == "not a record"
    assert [(c.id, c.status) for c in store.corrections()] == [(kept.id, "accepted"), (gone.id, "rejected")]


def test_a_reader_that_read_all_of_the_old_log_takes_the_compacted_one_as_read(tmp_path):
    """A server that had read the whole log keeps its state across another process's compaction
    (the compaction's note names the log and place it replaced) and reads only what came after;
    one that had not read all of it reads the new log whole; both then hold what a fresh reader
    holds, damaged lines numbered as in the new log."""
    folder = tmp_path / "store"
    writer, caught_up, behind = CorrectionStore(folder), CorrectionStore(folder), CorrectionStore(folder)
    writer.add([Correction(f"Satz {i} .", f"Sentence {i} .") for i in range(50)])
    writer.decide([writer.corrections()[0].id], "rejected")
    with open(folder / "corrections.jsonl", "ab") as log:
        log.write(b'{"broken": \n')
    caught_up.refresh()
    behind.refresh()
    writer.add([Correction("Noch einer .", "One more .")])  # read by `caught_up` only
    caught_up.refresh()
    kept = caught_up._state
    assert CorrectionStore(folder).compact() == (53, 52)  # 51 corrections and the damaged line
    writer.add([Correction("Danach .", "After .")])
    caught_up.refresh()
    behind.refresh()
    assert caught_up._state is kept  # taken as read: nothing read again but the line after
    assert behind._state is not kept
    fresh = CorrectionStore(folder)
    for reader in (caught_up, behind):
        assert [vars(c) for c in reader.corrections()] == [vars(c) for c in fresh.corrections()]
        assert [(d.number, d.line) for d in reader.damaged] == [(52, b'{"broken": \n')]
    assert fresh.corrections()[0].status == "rejected" and fresh.corrections()[-1].corrected == "After ."
