"""synthetic/text.py: monolingual text cleaned in two streamed passes: empty, over-long,
val/test-equal (compared loosely) and repeated lines dropped and counted, at most max_lines
kept, each kept line's key; lines read back by row; unreadable text one line before anything
is written."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from transformer_cli.errors import UsageError
from transformer_cli.synthetic.corpora import TextFile
from transformer_cli.synthetic.text import TextCounts, clean_text, comparable, line_key


def text(path, lines: list[str], gz: bool = False) -> TextFile:
    data = "".join(f"{x}\n" for x in lines).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return TextFile(path, "unused")


def test_keys_are_64_bit_and_comparison_ignores_case_spacing_and_final_punctuation():
    assert line_key("A dog.") == line_key("A dog.") != line_key("A dog")
    assert 0 <= line_key("x") < 2**64
    assert comparable("  A   Dog runs!  ") == comparable("a dog runs") == "a dog runs"
    assert comparable("A dog, running.") == "a dog, running"


def test_cleaning_drops_and_counts_each_kind_of_line(tmp_path):
    files = [
        text(tmp_path / "a.en", ["A dog runs.", "", "  A cat sleeps.  ", "one two three four five six", "A dog runs."]),
        text(tmp_path / "b.en.gz", ["the test sentence", "A bird sings.", "A cat sleeps.", "A fish swims."], gz=True),
    ]
    out = clean_text(files, tmp_path / "clean.txt", {comparable("The test sentence.")}, max_words=5, max_lines=3)
    assert (tmp_path / "clean.txt").read_text().splitlines() == ["A dog runs.", "A cat sleeps.", "A bird sings."]
    assert out.counts == TextCounts(
        read=9, kept=3, empty=1, too_long=1, in_val_or_test=1, duplicates=2, past_max_lines=1
    )
    assert out.keys.dtype == np.uint64 and out.keys.tolist() == [
        line_key(x) for x in ("A dog runs.", "A cat sleeps.", "A bird sings.")
    ]
    assert out.counts.summary() == (
        "9 lines read, 3 kept; dropped: 1 empty, 1 too long, 1 equal to a val/test sentence, "
        "2 repeated, 1 past max_lines"
    )
    assert out.counts.to_json()["duplicates"] == 2


def test_stops_are_checked_and_bad_bytes_are_one_line_before_anything_is_written(tmp_path):
    calls = []
    clean_text([text(tmp_path / "a.en", ["x"])], tmp_path / "ok.txt", set(), 5, None, lambda: calls.append(1))
    assert calls  # between blocks of both passes
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"A dog.\nA \xff cat.\n")
    with pytest.raises(UsageError, match=r"bad.en:2: not valid UTF-8 \(byte 0xff at column 3\)"):
        clean_text([TextFile(bad, "unused")], tmp_path / "out.txt", set(), 5, None)
    assert not (tmp_path / "out.txt").exists()
