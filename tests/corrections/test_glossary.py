"""The glossary's rules: whole-word, case-blind matching of word forms, the longest term first,
a target used in any case, and a bad file refused whole with its file and line."""

from pathlib import Path

import pytest

from transformer_cli.corrections.glossary import Glossary, Term, read_glossary
from transformer_cli.errors import UsageError


def _glossary(*pairs: tuple[str, str]) -> Glossary:
    return Glossary(Term(s, t, f"test:{i}") for i, (s, t) in enumerate(pairs, start=1))


def test_terms_match_whole_words_in_any_case_longest_then_leftmost() -> None:
    g = _glossary(("Hund", "dog"), ("Leine", "leash"), ("rote Leine", "red lead"), ("Mann", "man"))
    found = g.matches("Ein HUND an einer roten Leine, ein hund an der ROTE  leine; Hundehütte, Männer.")
    assert [(t.source, t.target) for t in found] == [
        ("Hund", "dog"),
        ("Leine", "leash"),  # "roten Leine": a word form of its own, so only Leine matches
        ("Hund", "dog"),
        ("rote Leine", "red lead"),  # the longest term, not Leine inside it
    ]
    assert g.matches("Eine Katze.") == []


def test_a_target_is_used_when_it_stands_as_whole_words_in_any_case() -> None:
    term = Term("rote Leine", "red lead", "test:1")
    assert term.used_in("Red lead, on a dog.")
    assert term.used_in("a dog on a red  lead")
    assert not term.used_in("a dog on a red leader")
    assert not term.used_in("a dog on a lead that is red")


def test_a_glossary_file_reads_terms_and_notes_and_skips_comments(tmp_path: Path) -> None:
    path = tmp_path / "terms.tsv"
    path.write_text("# source\ttarget\nHund\tdog\n\nLeine\tleash\tnot lead\r\nHund\tdog\n", encoding="utf-8")
    g = read_glossary(path)
    assert [(t.source, t.target, t.where) for t in g.terms] == [
        ("Hund", "dog", f"{path}:2"),
        ("Leine", "leash", f"{path}:4"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Hund\tdog\nLeine leash\n", ":2: a glossary line is a source term, a tab and its target term"),
        ("Hund\t\n", ":1: a glossary line"),
        ("Hund\tdog\ta\tb\n", ":1: a glossary line"),
        ("...\tdog\n", ":1: a term needs a word on each side"),
        ("Hund\tdog\nhund\thound\n", ":2: 'hund' is 'hound' here but 'dog' at "),
    ],
)
def test_a_bad_glossary_file_is_refused_naming_its_file_and_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "terms.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as e:
        read_glossary(path)
    assert f"{path}{problem}" in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unreadable_glossary_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "terms.tsv"
    path.write_bytes(b"Hund\t\xff\n")
    with pytest.raises(UsageError, match=r"glossary .*terms.tsv: cannot be read"):
        read_glossary(path)
