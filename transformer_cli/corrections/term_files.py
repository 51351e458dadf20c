"""Glossary terms from files (`tfm feedback add --terms FILE`):

    *.tbx   a termbase in TBX (ISO 30042: TBX v2's martif/termEntry/langSet/tig, and v3's
            tbx/conceptEntry/langSec/termSec, with or without its namespace): each entry's
            terms in the source language, every one of them with the entry's first target-language
            term not marked deprecated (administrativeStatus deprecatedTerm-admn-sts or
            supersededTerm-admn-sts): a termbase's admitted and deprecated source synonyms all
            translate as its preferred target term. An entry without a term in one of the two
            languages is skipped and counted (as a TMX unit is: files.py).
    other   a glossary TSV (glossary.py's `read_glossary`: source term, tab, target term, an
            optional note), refused whole at its first bad line.

Each term is a record of the store's terms log (store.py's TERMS): source term as `source`,
target term as `corrected`, `client` as given."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import UsageError
from .correction import Correction
from .files import XML_LANG, FileCorrections, unusable, xml_root
from .glossary import read_glossary

ENTRIES = ("termEntry", "conceptEntry")  # TBX v2, v3
LANGUAGES = ("langSet", "langSec")
TERM_GROUPS = ("tig", "ntig", "termSec")
DEPRECATED = ("deprecatedTerm-admn-sts", "supersededTerm-admn-sts", "deprecated", "superseded")


def read_terms(path: Path, langs: tuple[str, str], client: str | None) -> FileCorrections:
    """The terms of a TBX or glossary TSV file (`client`: theirs), as store records."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if path.suffix.lower() == ".tbx":
        return _tbx(path, langs, client)
    found = FileCorrections(path, unit="glossary line")
    found.corrections = [Correction(t.source, t.target, None, client, origin="file") for t in read_glossary(path).terms]
    return found


def _tbx(path: Path, langs: tuple[str, str], client: str | None) -> FileCorrections:
    root = xml_root(path, "TBX")
    found = FileCorrections(path, unit="term entry")
    entries = [e for e in root.iter() if _name(e) in ENTRIES]
    for number, entry in enumerate(entries, 1):
        terms = _terms(entry)
        firsts = {lang: next((t for t, deprecated in found_ if not deprecated), "") for lang, found_ in terms.items()}
        why = unusable(firsts, langs)
        if why:
            found.skip(number, why)
            continue
        target = firsts[langs[1]]
        for source, _ in terms[langs[0]]:
            found.corrections.append(Correction(source, target, None, client, origin="file"))
    if not found.corrections:
        why = f" ({found.skipped_summary()})" if found.skipped else ""
        raise UsageError(f"{path}: no term entry has terms in both {langs[0]} and {langs[1]}{why}")
    return found


def _terms(entry: ET.Element) -> dict[str, list[tuple[str, bool]]]:
    """An entry's terms by language (`de` for `de-DE`), in order, each with whether it is marked
    deprecated."""
    out: dict[str, list[tuple[str, bool]]] = {}
    for section in (e for e in entry.iter() if _name(e) in LANGUAGES):
        lang = (section.get(XML_LANG) or section.get("lang") or "").lower().split("-")[0]
        for group in (g for g in section.iter() if _name(g) in TERM_GROUPS):
            term = next((e for e in group.iter() if _name(e) == "term"), None)
            text = " ".join("".join(term.itertext()).split()) if term is not None else ""
            if lang and text:
                deprecated = any(_name(e) == "termNote" and (e.text or "").strip() in DEPRECATED for e in group.iter())
                out.setdefault(lang, []).append((text, deprecated))
    return out


def _name(element: ET.Element) -> str:
    """A tag without its namespace (TBX v3 puts its elements in one)."""
    tag = element.tag if isinstance(element.tag, str) else ""
    return tag.rsplit("}", 1)[-1]
