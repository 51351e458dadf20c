"""Corrections from translators' files (`tfm feedback add FILE`):

    *.tsv   one correction a line: source, corrected translation, and optionally the output
            it corrects and a client id, separated by tabs
    *.tmx   a TMX file's translation units: the segment in the source language and the one in
            the target language (xml:lang `de` or `de-DE` for German, ...)

A TSV line that holds no correction is one error naming the file and line. A TMX unit of
another language pair, or without text in one of the two languages, is skipped and counted
(`FileCorrections.skipped_line`); a TMX without one usable unit is one error naming the file.

A segment's text is what TMX 1.4b calls text: the content of its inline codes (<bpt>, <ept>,
<it>, <ph>, <ut>: the native code of the document it came from, e.g. `<b>`, `{1}`) and of their
sub-flows (<sub>: a footnote's or an attribute's own text, not part of the sentence) is left
out, <hi>'s text kept, and the spaces left behind collapsed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from .store import Correction

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
NOT_TEXT = frozenset({"bpt", "ept", "it", "ph", "ut", "sub"})  # TMX 1.4b: native code, sub-flows
OTHER_PAIR = "of another language pair"
NO_SEGMENT = "missing a segment"


@dataclass
class FileCorrections:
    """What one file gives: its corrections, and the TMX units it skipped (how many for each
    reason, and the number of the first)."""

    path: Path
    corrections: list[Correction] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    first_skipped: int | None = None
    unit: str = "translation unit"  # what the file's entries are called (a TBX's: term entries)

    def skip(self, number: int, why: str) -> None:
        self.skipped[why] += 1
        self.first_skipped = self.first_skipped or number

    def skipped_line(self) -> str | None:
        """One line on what was skipped, naming the file (None: nothing was)."""
        return f"{self.path}: {self.skipped_summary()}" if self.skipped else None

    def skipped_summary(self) -> str:
        reasons = ", ".join(f"{n} {why}" for why, n in self.skipped.items())
        first = self.unit.split()[-1]
        return f"{self.skipped.total()} {self.unit}(s) skipped: {reasons}; the first: {first} {self.first_skipped}"


def read_corrections(path: Path, langs: tuple[str, str], client: str | None) -> FileCorrections:
    """The corrections of a TSV or TMX file (`client`: for those that name none)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if path.suffix.lower() == ".tmx":
        return _tmx(path, langs, client)
    return _tsv(path, client)


def _tsv(path: Path, client: str | None) -> FileCorrections:
    found = FileCorrections(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or len(fields) > 4 or not fields[0].strip() or not fields[1].strip():
            expected = "source<TAB>corrected[<TAB>output[<TAB>client]]"
            raise UsageError(f"{path}:{number}: expected {expected}, found {len(fields)} field(s)")
        output = fields[2] if len(fields) > 2 and fields[2].strip() else None
        who = fields[3] if len(fields) > 3 and fields[3].strip() else client
        found.corrections.append(Correction(fields[0].strip(), fields[1].strip(), output, who, origin="file"))
    return found


def xml_root(path: Path, what: str) -> ET.Element:
    """The root element of the XML file `path`; one that is not XML is a UsageError naming its
    line, as not a `what` file."""
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as e:
        raise UsageError(f"{path}:{e.position[0]}: not a {what} file ({e})") from None


def _tmx(path: Path, langs: tuple[str, str], client: str | None) -> FileCorrections:
    root = xml_root(path, "TMX")
    found = FileCorrections(path)
    for number, unit in enumerate(root.iter("tu"), 1):
        segments = _segments(unit)
        why = unusable(segments, langs)
        if why:
            found.skip(number, why)
        else:
            found.corrections.append(Correction(segments[langs[0]], segments[langs[1]], None, client, origin="file"))
    if not found.corrections:
        why = f" ({found.skipped_summary()})" if found.skipped else ""
        raise UsageError(f"{path}: no translation unit has segments in both {langs[0]} and {langs[1]}{why}")
    return found


def _segments(unit: ET.Element) -> dict[str, str]:
    """A unit's segments by language (`de` for `de-DE`): their text, "" for a variant without one."""
    segments = {}
    for variant in unit.iter("tuv"):
        lang = (variant.get(XML_LANG) or variant.get("lang") or "").lower().split("-")[0]
        seg = variant.find("seg")
        if lang:
            segments[lang] = segment_text(seg) if seg is not None else ""
    return segments


def unusable(segments: dict[str, str], langs: tuple[str, str]) -> str | None:
    """Why a unit with these segments (by language) is no correction (None: it is one)."""
    if all(segments.get(lang) for lang in langs):
        return None
    return OTHER_PAIR if set(segments) - set(langs) else NO_SEGMENT


def segment_text(seg: ET.Element) -> str:
    """The text of a <seg> (see the module docstring), spaces collapsed and trimmed."""
    return " ".join("".join(_text(seg)).split())


def _text(element: ET.Element) -> Iterator[str]:
    """The pieces of `element`'s text, its inline codes and sub-flows left out."""
    yield element.text or ""
    for child in element:
        if child.tag not in NOT_TEXT:
            yield from _text(child)
        yield child.tail or ""
