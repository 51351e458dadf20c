"""corrections/files.py: translators' TSV and TMX files (a TMX's inline codes are not text, its
units of another language pair or missing a segment skipped and counted), and one line for what
is not a correction."""

from __future__ import annotations

import pytest

from transformer_cli.corrections.files import read_corrections
from transformer_cli.errors import UsageError

HEADER = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="de-DE" datatype="plaintext" segtype="sentence" adminlang="en"
 o-tmf="x" creationtool="x" creationtoolversion="1"/><body>
"""
TMX = f"""{HEADER}
<tu><tuv xml:lang="de-DE"><seg>Ein Hund rennt .</seg></tuv><tuv xml:lang="en-GB"><seg>A dog runs .</seg></tuv></tu>
<tu><tuv xml:lang="de"><seg>Eine <bpt i="1">&lt;b&gt;</bpt>Katze<ept i="1">&lt;/b&gt;</ept> .</seg></tuv>
<tuv xml:lang="en"><seg>A cat .</seg></tuv></tu>
</body></tmx>
"""


def tmx_file(path, units: list[tuple[str, str, str, str]]):
    """A TMX file of units (lang, seg, lang, seg), segments as XML; a lang "" leaves its tuv out."""
    tus = "".join(f"<tu>{tuv(a, b)}{tuv(c, d)}</tu>\n" for a, b, c, d in units)
    path.write_text(f"{HEADER}{tus}</body></tmx>\n", encoding="utf-8")
    return path


def tuv(lang: str, seg: str) -> str:
    return f'<tuv xml:lang="{lang}"><seg>{seg}</seg></tuv>' if lang else ""


def test_tsv_and_tmx_give_corrections(tmp_path):
    tsv = tmp_path / "fixes.tsv"
    tsv.write_text("Ein Hund .\tA dog .\n\nEine Katze .\tA cat .\tA kitten .\tagency\n", encoding="utf-8")
    found = read_corrections(tsv, ("de", "en"), "desk").corrections
    assert [(c.source, c.corrected, c.output, c.client, c.origin) for c in found] == [
        ("Ein Hund .", "A dog .", None, "desk", "file"),
        ("Eine Katze .", "A cat .", "A kitten .", "agency", "file"),
    ]
    tmx = tmp_path / "memory.tmx"
    tmx.write_text(TMX, encoding="utf-8")
    assert [(c.source, c.corrected) for c in read_corrections(tmx, ("de", "en"), None).corrections] == [
        ("Ein Hund rennt .", "A dog runs ."),
        ("Eine Katze .", "A cat ."),
    ]


def test_tmx_inline_codes_are_dropped_highlighted_text_kept_and_spaces_collapsed(tmp_path):
    """TMX 1.4b: <bpt> <ept> <it> <ph> <ut> hold native code, <sub> a sub-flow (not the
    sentence's), <hi> text."""
    units = [
        ("de", '<bpt i="1">&lt;b&gt;</bpt>Ein Mann<ept i="1">&lt;/b&gt;</ept> fährt .', "en", "A man rides ."),
        ("de", "Ein Mann liest .", "en", '<ph x="1">{1}</ph>A man reads .'),
        (
            "de",
            ' <it pos="begin">&lt;i&gt;</it> Ein <hi type="em">großer<ph>&lt;br/&gt;</ph></hi>  Hund <ut>{/i}</ut>',
            "en",
            'A <hi>big</hi> dog <ph>&lt;img alt="<sub>ein Bild</sub>"/&gt;</ph> .',
        ),
    ]
    found = read_corrections(tmx_file(tmp_path / "codes.tmx", units), ("de", "en"), None)
    assert [(c.source, c.corrected) for c in found.corrections] == [
        ("Ein Mann fährt .", "A man rides ."),
        ("Ein Mann liest .", "A man reads ."),
        ("Ein großer Hund", "A big dog ."),
    ]


def test_tmx_units_of_another_pair_or_missing_a_segment_are_skipped_and_counted(tmp_path):
    units = [
        ("de", "Ein Hund .", "en", "A dog ."),
        ("de", "Eine Katze .", "fr", "Un chat ."),  # another language pair
        ("de", "Ein Haus .", "", ""),  # no en segment
        ("es", "Una casa .", "fr", "Une maison ."),  # another language pair
        ("de", "Ein Baum .", "en", '<ph x="1">{1}</ph>'),  # an en segment without text
        ("de-AT", "Ein Baum .", "en-US", "A tree ."),
    ]
    found = read_corrections(tmx_file(tmp_path / "mixed.tmx", units), ("de", "en"), "desk")
    assert [(c.source, c.corrected, c.client) for c in found.corrections] == [
        ("Ein Hund .", "A dog .", "desk"),
        ("Ein Baum .", "A tree .", "desk"),
    ]
    assert found.skipped_line() == (
        f"{tmp_path}/mixed.tmx: 4 translation unit(s) skipped: 2 of another language pair, "
        "2 missing a segment; the first: unit 2"
    )
    clean = read_corrections(tmx_file(tmp_path / "clean.tmx", units[:1]), ("de", "en"), None)
    assert clean.skipped_line() is None


def test_what_is_not_a_correction_is_one_line_naming_the_place(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("Ein Hund .\tA dog .\nonly one field\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad.tsv:2: expected source<TAB>corrected.*found 1 field"):
        read_corrections(tsv, ("de", "en"), None)
    tmx = tmx_file(tmp_path / "other.tmx", [("de", "Ein Hund .", "fr", "Un chien ."), ("de", "Ein Haus .", "", "")])
    with pytest.raises(UsageError) as refused:  # no unit usable: the file is refused
        read_corrections(tmx, ("de", "en"), None)
    assert str(refused.value) == (
        f"{tmx}: no translation unit has segments in both de and en (2 translation unit(s) skipped: "
        "1 of another language pair, 1 missing a segment; the first: unit 1)"
    )
    empty = tmx_file(tmp_path / "empty.tmx", [])
    with pytest.raises(UsageError, match=r"empty.tmx: no translation unit has segments in both de and en$"):
        read_corrections(empty, ("de", "en"), None)
    broken = tmp_path / "broken.tmx"
    broken.write_text("Ein Hund .\tA dog .\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"broken.tmx:1: not a TMX file"):
        read_corrections(broken, ("de", "en"), None)
    with pytest.raises(UsageError, match="no such file"):
        read_corrections(tmp_path / "missing.tsv", ("de", "en"), None)
