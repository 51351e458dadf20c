"""term_files.py: glossary terms from a TSV glossary or a TBX termbase (v2 and v3, namespaced or
not): each source synonym with the entry's preferred target term, deprecated targets passed
over, entries of another language pair skipped and counted, a file without one refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_cli.corrections.term_files import read_terms
from transformer_cli.errors import UsageError

TBX2 = """<?xml version="1.0" encoding="UTF-8"?>
<martif type="TBX" xml:lang="en"><text><body>
  <termEntry id="1">
    <langSet xml:lang="de-DE"><tig><term>Hund</term></tig><tig><term>Köter</term>
      <termNote type="administrativeStatus">deprecatedTerm-admn-sts</termNote></tig></langSet>
    <langSet xml:lang="en"><tig><term>hound</term>
      <termNote type="administrativeStatus">deprecatedTerm-admn-sts</termNote></tig>
      <tig><term>dog</term></tig></langSet>
  </termEntry>
  <termEntry id="2"><langSet xml:lang="fr"><tig><term>chien</term></tig></langSet>
    <langSet xml:lang="en"><tig><term>dog</term></tig></langSet></termEntry>
  <termEntry id="3"><langSet xml:lang="de"><tig><term>Leine</term></tig></langSet></termEntry>
</body></text></martif>
"""
TBX3 = """<?xml version="1.0" encoding="UTF-8"?>
<tbx type="TBX-Core" style="dca" xml:lang="en" xmlns="urn:iso:std:iso:30042:ed-2"><text><body>
  <conceptEntry id="c1"><langSec xml:lang="de"><termSec><term>rote  Leine</term></termSec></langSec>
    <langSec xml:lang="en"><termSec><term>red leash</term></termSec></langSec></conceptEntry>
</body></text></tbx>
"""


def _read(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return read_terms(path, ("de", "en"), "desk")


def test_a_tbx_gives_each_source_synonym_the_preferred_target_and_counts_what_it_skips(tmp_path) -> None:
    found = _read(tmp_path, "base.tbx", TBX2)
    assert [(c.source, c.corrected, c.client, c.origin) for c in found.corrections] == [
        ("Hund", "dog", "desk", "file"),
        ("Köter", "dog", "desk", "file"),
    ]
    assert found.skipped_line() == (
        f"{tmp_path / 'base.tbx'}: 2 term entry(s) skipped: 1 of another language pair, 1 missing a segment; "
        "the first: entry 2"
    )
    v3 = _read(tmp_path, "v3.tbx", TBX3)
    assert [(c.source, c.corrected) for c in v3.corrections] == [("rote Leine", "red leash")]


def test_a_glossary_tsv_gives_its_terms_and_a_bad_file_is_refused_in_one_line(tmp_path) -> None:
    found = _read(tmp_path, "terms.tsv", "# source\ttarget\nHund\tdog\tnot hound\nLeine\tleash\n")
    assert [(c.source, c.corrected) for c in found.corrections] == [("Hund", "dog"), ("Leine", "leash")]
    assert found.skipped_line() is None
    with pytest.raises(UsageError, match=r"bad.tsv:1: a glossary line is a source term"):
        _read(tmp_path, "bad.tsv", "Hund dog\n")
    with pytest.raises(UsageError, match=r"none.tbx: no term entry has terms in both de and en \(1 term entry"):
        _read(tmp_path, "none.tbx", TBX3.replace('"de"', '"fr"'))
    with pytest.raises(UsageError, match=r"broken.tbx:3: not a TBX file"):
        _read(tmp_path, "broken.tbx", "<?xml version='1.0'?>\n<martif><text>\n")
    with pytest.raises(UsageError, match=r"missing.tbx: no such file"):
        read_terms(tmp_path / "missing.tbx", ("de", "en"), None)
