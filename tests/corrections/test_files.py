"""corrections/files.py: translators' TSV and TMX files, and one line for what is not a correction."""

from __future__ import annotations

import pytest

from transformer_cli.corrections.files import read_corrections
from transformer_cli.errors import UsageError

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="de-DE" datatype="plaintext" segtype="sentence" adminlang="en"
 o-tmf="x" creationtool="x" creationtoolversion="1"/><body>
<tu><tuv xml:lang="de-DE"><seg>Ein Hund rennt .</seg></tuv><tuv xml:lang="en-GB"><seg>A dog runs .</seg></tuv></tu>
<tu><tuv xml:lang="de"><seg>Eine <bpt i="1">&lt;b&gt;</bpt>Katze<ept i="1">&lt;/b&gt;</ept> .</seg></tuv>
<tuv xml:lang="en"><seg>A cat .</seg></tuv></tu>
</body></tmx>
"""


def test_tsv_and_tmx_give_corrections(tmp_path):
    tsv = tmp_path / "fixes.tsv"
    tsv.write_text("Ein Hund .\tA dog .\n\nEine Katze .\tA cat .\tA kitten .\tagency\n", encoding="utf-8")
    found = read_corrections(tsv, ("de", "en"), "desk")
    assert [(c.source, c.corrected, c.output, c.client, c.origin) for c in found] == [
        ("Ein Hund .", "A dog .", None, "desk", "file"),
        ("Eine Katze .", "A cat .", "A kitten .", "agency", "file"),
    ]
    tmx = tmp_path / "memory.tmx"
    tmx.write_text(TMX, encoding="utf-8")
    assert [(c.source, c.corrected) for c in read_corrections(tmx, ("de", "en"), None)] == [
        ("Ein Hund rennt .", "A dog runs ."),
        ("Eine <b>Katze</b> .", "A cat ."),
    ]


def test_what_is_not_a_correction_is_one_line_naming_the_place(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("Ein Hund .\tA dog .\nonly one field\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad.tsv:2: expected source<TAB>corrected.*found 1 field"):
        read_corrections(tsv, ("de", "en"), None)
    tmx = tmp_path / "bad.tmx"
    tmx.write_text(TMX.replace('xml:lang="en"', 'xml:lang="fr"'), encoding="utf-8")
    with pytest.raises(UsageError, match="translation unit 2 has no de and en segment"):
        read_corrections(tmx, ("de", "en"), None)
    with pytest.raises(UsageError, match="no such file"):
        read_corrections(tmp_path / "missing.tsv", ("de", "en"), None)
