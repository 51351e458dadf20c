"""Marks that only tfm writes into training text: the tags of synthetic sources and the filler
of noised back-translations. Each is one character of Unicode's private use area, which no
tokenizer normalisation changes and no natural text contains, so a tokenizer fitted on tagged
text learns it as one token. Users' input is stripped of them before it is encoded
(`strip_marks`): a model trained with tags always translates untagged sources."""

from __future__ import annotations

BACK_TRANSLATION_TAG = "\ue000"  # starts a back-translated (synthetic) source
FORWARD_TRANSLATION_TAG = "\ue001"  # starts the source of a forward-translated pair, when tagged
FILLER = "\ue002"  # a word blanked out of a noised back-translation (Edunov et al. 2018)
MARKS = (BACK_TRANSLATION_TAG, FORWARD_TRANSLATION_TAG, FILLER)
_REMOVE = {ord(mark): None for mark in MARKS}


def tagged(tag: str, line: str) -> str:
    """`line` as a tagged training source."""
    return f"{tag} {line}"


def strip_marks(line: str) -> str:
    """`line` without any of tfm's marks (what a model is given to translate)."""
    return line.translate(_REMOVE) if any(mark in line for mark in MARKS) else line
