"""cli_feedback.py: `tfm feedback add | list | accept | reject` on a config's store, and a run of
the config trains on what they accepted; a TMX's unusable units skipped and said, a correction
added again after a later one replaced it current again, a reader that stops early (`| head`)
ending `tfm feedback list` quietly, damaged lines of the store skipped and said, and a file's
lines counted as one caller's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from helpers import run_tfm, write_config

from transformer_cli.cli_feedback import feedback
from transformer_cli.corrections.memory import TranslationMemory
from transformer_cli.corrections.store import Correction, CorrectionStore


def test_feedback_adds_lists_accepts_and_the_next_run_trains_on_it(tmp_path, corpus_dir):
    cfg = write_config(
        tmp_path / "fix.yaml",
        tmp_path,
        corpus_dir,
        corrections={"store": str(tmp_path / "store"), "weight": 3},
        train={"epochs": 1},
    )
    fixes = tmp_path / "fixes.tsv"
    fixes.write_text("Ein Hund rennt .\tA dog runs .\nEin Baum .\tEin Baum .\n", encoding="utf-8")
    r = run_tfm("feedback", "add", str(fixes), "-c", str(cfg), "--client", "desk")
    assert r.returncode == 0, r.stderr
    assert "2 correction(s) added to" in r.stderr and ": 1 accepted, 1 held" in r.stderr
    r = run_tfm("feedback", "list", "--held", "-c", str(cfg))
    (held,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert held["reasons"] == ["the correction is the source itself"] and held["client"] == "desk"
    r = run_tfm("feedback", "accept", "nope", "-c", str(cfg))
    assert r.returncode == 2 and "no correction nope in" in r.stderr and len(r.stderr.splitlines()) == 1
    assert run_tfm("feedback", "accept", held["id"], "-c", str(cfg)).returncode == 0
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "checkpoints" / "fix" / "train.log").read_text()
    assert "corrections: 2 accepted from 1 caller(s) (x3 an epoch), 0 held" in log
    assert "300 train pairs x1, 2 corrections pairs x3; 306 pairs an epoch" in log
    r = run_tfm("feedback", "list", "-c", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2
    plain = write_config(tmp_path / "plain.yaml", tmp_path, corpus_dir)
    r = run_tfm("feedback", "list", "-c", str(plain))
    assert r.returncode == 2 and "corrections.store is not set" in r.stderr


def test_the_feedback_group_has_its_five_commands():
    assert sorted(c.name or "" for c in feedback.registered_commands) == ["accept", "add", "compact", "list", "reject"]


def with_store(tmp_path: Path, corpus_dir: Path) -> Path:
    return write_config(tmp_path / "fix.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})


def tmx_file(path: Path, units: list[tuple[str, str, str, str]]) -> Path:
    """A TMX file of units (lang, seg, lang, seg); a lang "" leaves its tuv out."""
    tuv = '<tuv xml:lang="{}"><seg>{}</seg></tuv>'.format
    tus = "".join(f"<tu>{tuv(a, b) if a else ''}{tuv(c, d) if c else ''}</tu>\n" for a, b, c, d in units)
    path.write_text(
        f'<?xml version="1.0"?>\n<tmx version="1.4"><header/><body>\n{tus}</body></tmx>\n', encoding="utf-8"
    )
    return path


def test_a_tmx_with_unusable_units_adds_the_others_and_says_what_it_skipped(tmp_path, corpus_dir):
    cfg = with_store(tmp_path, corpus_dir)
    unusable = [
        ("de", "Ein Haus .", "fr", "Une maison ."),
        ("es", "Una casa .", "fr", "Une maison ."),
        ("de", "Ein Baum .", "", ""),
    ]
    good = [
        ("de", f'<bpt i="1">&lt;b&gt;</bpt>Ein Hund {i} .<ept i="1">&lt;/b&gt;</ept>', "en", f"A dog {i} .")
        for i in range(7)
    ]
    tmx = tmx_file(tmp_path / "memory.tmx", good + unusable)
    r = run_tfm("feedback", "add", str(tmx), "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    skipped = "3 translation unit(s) skipped: 2 of another language pair, 1 missing a segment; the first: unit 8"
    assert f"{tmx}: {skipped}" in r.stderr
    assert "7 correction(s) added to" in r.stderr and ": 7 accepted, 0 held" in r.stderr
    fixes = tmp_path / "fixes.tsv"
    fixes.write_text("Ein Boot .\tA boat .\n", encoding="utf-8")
    none_usable = tmx_file(tmp_path / "other.tmx", unusable)
    r = run_tfm("feedback", "add", str(fixes), str(none_usable), "-c", str(cfg))
    skipped = skipped.replace("unit 8", "unit 1")
    assert (r.returncode, r.stderr) == (
        2,
        f"tfm: error: {none_usable}: no translation unit has segments in both de and en ({skipped})\n",
    )
    not_xml = tmp_path / "notes.tmx"
    not_xml.write_text("Ein Boot .\tA boat .\n", encoding="utf-8")
    r = run_tfm("feedback", "add", str(fixes), str(not_xml), "-c", str(cfg))
    assert (
        r.returncode == 2
        and r.stderr.startswith(f"tfm: error: {not_xml}:1: not a TMX file")
        and len(r.stderr.splitlines()) == 1
    )
    listed = [json.loads(line) for line in run_tfm("feedback", "list", "-c", str(cfg)).stdout.splitlines()]
    assert [(c["source"], c["status"]) for c in listed] == [(f"Ein Hund {i} .", "accepted") for i in range(7)]


def test_a_correction_added_again_after_a_later_one_replaced_it_is_current_again(tmp_path, corpus_dir):
    cfg, fixes = with_store(tmp_path, corpus_dir), tmp_path / "fixes.tsv"
    for corrected in ["A dog runs .", "A dog is running .", "A dog runs ."]:
        fixes.write_text(f"Ein Hund rennt .\t{corrected}\n", encoding="utf-8")
        r = run_tfm("feedback", "add", str(fixes), "-c", str(cfg))
        assert r.returncode == 0 and ": 1 accepted, 0 held" in r.stderr, r.stderr
    listed = [json.loads(line) for line in run_tfm("feedback", "list", "-c", str(cfg)).stdout.splitlines()]
    assert [c["status"] for c in listed] == ["accepted"] * 3
    served = TranslationMemory(CorrectionStore(tmp_path / "store")).lookup("Ein Hund rennt .")
    assert served is not None and (served.translation, served.id) == ("A dog runs .", listed[2]["id"])


def test_a_reader_that_stops_early_ends_feedback_list_quietly(tmp_path, corpus_dir):
    """`tfm feedback list | head -1`: the reader closes the pipe while tfm still writes."""
    cfg = with_store(tmp_path, corpus_dir)
    CorrectionStore(tmp_path / "store").add([Correction(f"Satz {i} .", f"Sentence {i} .") for i in range(800)])
    env = {k: v for k, v in os.environ.items() if k != "TFM_DEBUG"}
    command = [sys.executable, "-m", "transformer_cli", "feedback", "list", "-c", str(cfg)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as p:
        assert p.stdout is not None and p.stderr is not None
        first = json.loads(p.stdout.readline())
        p.stdout.close()  # 800 lines are far more than the pipe holds: tfm is still writing
        assert (p.wait(120), p.stderr.read().decode()) == (141, "")  # 128 + SIGPIPE, as Unix tools
    assert first["source"] == "Satz 0 ."


def test_damaged_lines_of_the_store_are_skipped_and_said_by_list_and_by_train(tmp_path, corpus_dir):
    """A record of the wrong shape (a number as source, no corrected, not an object) was
    `tfm: internal error: TypeError` (exit 1) in `tfm feedback list` and `tfm train`."""
    cfg = write_config(
        tmp_path / "fix.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")}, train={"epochs": 1}
    )
    store = CorrectionStore(tmp_path / "store")
    good = Correction("Ein Hund rennt .", "A dog runs .")
    store.add([good])
    with open(store.path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "n", "source": 5, "corrected": "Five ."}) + "\n")
        f.write(json.dumps({"id": "m", "source": "Ein Haus ."}) + "\n")
        f.write("[1, 2]\n")
    r = run_tfm("feedback", "list", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["id"] for line in r.stdout.splitlines()] == [good.id]
    said = [
        f"{store.path}:2: a correction: source has the wrong type (int); line skipped",
        f"{store.path}:3: a correction has no corrected; line skipped",
        f"{store.path}:4: not a JSON object (list); line skipped",
        f"{store.path}: 3 damaged line(s) skipped: 2, 3, 4",
    ]
    assert [line.split(" ", 2)[2] for line in r.stderr.splitlines()] == [f"warning: {s}" for s in said]
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    assert all(f"warning: {s}" in r.stderr for s in said[:3])
    log = (tmp_path / "checkpoints" / "fix" / "train.log").read_text()
    assert "corrections: 1 accepted from 1 caller(s) (x4 an epoch), 0 held" in log


def test_a_files_lines_count_against_the_user_who_adds_it_whatever_clients_they_name(tmp_path, corpus_dir):
    """corrections.per_client_per_day counted the 4th column's client names: a TSV naming a new
    client on each line was accepted whole, however long. A file added by one user is one caller."""
    import pwd

    store = {"store": str(tmp_path / "store"), "per_client_per_day": 20}
    cfg = write_config(tmp_path / "fix.yaml", tmp_path, corpus_dir, corrections=store)
    fixes = tmp_path / "fixes.tsv"
    fixes.write_text("".join(f"Satz {i} .\tSentence {i} .\t\tclient-{i}\n" for i in range(30)), encoding="utf-8")
    r = run_tfm("feedback", "add", str(fixes), "-c", str(cfg))
    assert r.returncode == 0 and ": 20 accepted, 10 held" in r.stderr, r.stderr
    listed = [json.loads(line) for line in run_tfm("feedback", "list", "-c", str(cfg)).stdout.splitlines()]
    assert [c["client"] for c in listed] == [f"client-{i}" for i in range(30)]  # kept as labels
    assert {c["caller"] for c in listed} == {f"user {pwd.getpwuid(os.getuid()).pw_name}"}
    assert listed[20]["reasons"] == ["the caller's 20 corrections of the day are accepted already"]


def test_a_correction_added_while_a_large_file_is_being_added_is_stored_between_its_batches(tmp_path, corpus_dir):
    """`tfm feedback add` lets go of the store's lock every 100 corrections: a writer that comes
    meanwhile (a server's POST) waits for one batch, not for the rest of the file."""
    cfg, lines = with_store(tmp_path, corpus_dir), 20_000
    big = tmp_path / "big.tsv"
    big.write_text("".join(f"Ein Satz {i} .\tA sentence {i} .\n" for i in range(lines)), encoding="utf-8")
    cap = "corrections.per_client_per_day=10000000"
    adding = subprocess.Popen(
        [sys.executable, "-m", "transformer_cli", "feedback", "add", str(big), "-c", str(cfg), "-s", cap, "-q"],
        stderr=subprocess.PIPE,
        text=True,
    )
    store = CorrectionStore(tmp_path / "store")
    while len(store.corrections()) < 500 and adding.poll() is None:
        time.sleep(0.01)
    (mine,) = store.add([Correction("Ein Hund bellt .", "A dog barks .", caller="address 10.0.0.5")])
    assert adding.wait(300) == 0, adding.stderr.read() if adding.stderr else ""
    ids = [c.id for c in store.corrections()]
    assert len(ids) == lines + 1 and 500 <= ids.index(mine.id) <= lines - 500


def test_feedback_adds_lists_and_decides_terms_in_their_own_log(tmp_path, corpus_dir):
    store = tmp_path / "store"
    cfg = write_config(
        tmp_path / "terms.yaml",
        tmp_path,
        corpus_dir,
        corrections={"store": str(store), "glossary_weight": 2},
    )
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Hund\tdog\nLeine\tleash\nBerlin\tBerlin\n", encoding="utf-8")
    r = run_tfm("feedback", "add", "--terms", str(glossary), "-c", str(cfg), "--client", "desk")
    assert r.returncode == 0, r.stderr
    assert f"3 term(s) added to {store / 'terms.jsonl'}: 3 accepted, 0 held" in r.stderr
    tbx = tmp_path / "base.tbx"
    tbx.write_text(
        '<martif xml:lang="en"><text><body><termEntry><langSet xml:lang="de"><tig><term>hund</term></tig></langSet>'
        '<langSet xml:lang="en"><tig><term>dog</term></tig></langSet></termEntry>'
        '<termEntry><langSet xml:lang="de"><tig><term>Ball</term></tig></langSet></termEntry></body></text></martif>',
        encoding="utf-8",
    )
    r = run_tfm("feedback", "add", "--terms", str(tbx), "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    assert "1 term entry(s) skipped: 1 missing a segment; the first: entry 2" in r.stderr
    assert ": 0 accepted, 1 held" in r.stderr  # hund -> dog is Hund -> dog, accepted already
    listed = [json.loads(line) for line in run_tfm("feedback", "list", "--terms", "-c", str(cfg)).stdout.splitlines()]
    assert [(t["source"], t["corrected"], t["status"]) for t in listed] == [
        ("Hund", "dog", "accepted"),
        ("Leine", "leash", "accepted"),
        ("Berlin", "Berlin", "accepted"),
        ("hund", "dog", "held"),
    ]
    assert run_tfm("feedback", "list", "-c", str(cfg)).stdout == ""  # no correction
    assert run_tfm("feedback", "reject", listed[2]["id"], "-c", str(cfg)).returncode == 0
    r = run_tfm("feedback", "compact", "-c", str(cfg))
    assert r.returncode == 0 and f"{store / 'terms.jsonl'} compacted: 5 line(s) -> 4" in r.stderr, r.stderr
    # (the next run trains on the accepted ones: tests/corrections/test_glossary_part.py)
