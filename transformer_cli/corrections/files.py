"""Corrections from translators' files (`tfm feedback add FILE`):

    *.tsv   one correction a line: source, corrected translation, and optionally the output
            it corrects and a client id, separated by tabs
    *.tmx   a TMX file's translation units: the segment in the source language and the one in
            the target language (xml:lang `de` or `de-DE` for German, ...)

A line or unit that holds no correction is one error naming the file and where.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import UsageError
from .store import Correction

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def read_corrections(path: Path, langs: tuple[str, str], client: str | None) -> list[Correction]:
    """The corrections of a TSV or TMX file (`client`: for those that name none)."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if path.suffix.lower() == ".tmx":
        return _tmx(path, langs, client)
    return _tsv(path, client)


def _tsv(path: Path, client: str | None) -> list[Correction]:
    out = []
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
        out.append(Correction(fields[0].strip(), fields[1].strip(), output, who, origin="file"))
    return out


def _tmx(path: Path, langs: tuple[str, str], client: str | None) -> list[Correction]:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise UsageError(f"{path}:{e.position[0]}: not a TMX file ({e})") from None
    out = []
    for number, unit in enumerate(root.iter("tu"), 1):
        segments: dict[str, str] = {}
        for variant in unit.iter("tuv"):
            lang = (variant.get(XML_LANG) or variant.get("lang") or "").lower().split("-")[0]
            seg = variant.find("seg")
            if seg is not None:
                segments[lang] = "".join(seg.itertext()).strip()
        if not segments.get(langs[0]) or not segments.get(langs[1]):
            raise UsageError(f"{path}: translation unit {number} has no {langs[0]} and {langs[1]} segment")
        out.append(Correction(segments[langs[0]], segments[langs[1]], None, client, origin="file"))
    return out
