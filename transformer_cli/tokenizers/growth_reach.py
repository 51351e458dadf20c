"""Which lines a grown SentencePiece vocabulary (tokenizers/growth.py) encodes otherwise than
the vocabulary it grew from: only those whose normalized text holds an added piece.

SentencePiece encodes a line's normalized text (NFKC and the model's rules, spaces and the
line's start as `▁`; tfm lowercases first where the tokenizer says so), and growth leaves the
normalizer and every old piece as they were:
- BPE starts from the text's characters (a user-defined symbol whole) and merges adjacent
  symbols while their concatenation is a piece, highest score first. A concatenation is a
  substring of the text, so a text that holds no added piece offers the same merges, in the
  same order, as before: the same pieces. Byte fallback then spells the same unknown symbols.
- Unigram takes the best-scoring path through a lattice of every piece that matches the text,
  so a text without an added piece has the same lattice, except for two scores the model
  derives from its NORMAL pieces: an <unk> node's (the lowest score, minus 10) and a
  user-defined symbol's (from the highest). Added pieces scored within the old pieces'
  range leave both as they were; a growth that scores one outside it can change any line
  with an unknown character or a mark, and is not narrowed here (`reach` says why).
Tests encode every line of a corpus with both vocabularies to hold this to SentencePiece.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..contracts.tokenizer import Tokenizer
from .growth import extends, is_bpe, normal_scores
from .subword import SubwordTokenizer

Trie = dict[str, "Trie"]  # a character: what follows it ("": a piece ends)


class Reach:
    """The added pieces of one side's grown vocabulary, to find the lines they can change."""

    def __init__(self, grown: SubwordTokenizer, added: Sequence[str]):
        self.grown, self.added = grown, tuple(added)
        self.pattern = any_of(self.added)

    def touched(self, lines: Sequence[str]) -> np.ndarray:
        """[len(lines)] bool: whether each line's normalized text holds an added piece."""
        hit = np.zeros(len(lines), dtype=bool)
        if self.pattern is None:
            return hit
        text = self.grown.sp.normalize([line.lower() if self.grown.lowercase else line for line in lines])
        ends = np.cumsum(np.fromiter(map(len, text), dtype=np.int64, count=len(text)) + 1)  # each line's "\n"
        joined = "\n".join(text)  # searched at once (no piece holds a line break)
        at = np.fromiter((m.start() for m in self.pattern.finditer(joined)), dtype=np.int64)
        hit[np.searchsorted(ends, at, side="right")] = True
        return hit


def any_of(pieces: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern that finds the first of `pieces` in a line and takes the rest of the line
    (one match a line that holds any); None for no pieces. A piece that holds another is left
    out (the other finds its lines: a BPE growth's joins `▁pu`, `▁pude`, `▁pudel` need only
    `▁pu`), and the rest are one trie, so that a position is tried once per next character,
    not once per piece."""
    kept = sorted({p for p in pieces if not any(q != p and q in p for q in pieces)})
    if not kept:
        return None
    trie: Trie = {}
    for piece in kept:
        node = trie
        for char in piece:
            node = node.setdefault(char, {})
        node[""] = {}  # a piece ends here (no kept piece goes on from it: it would hold this one)
    return re.compile(_alternatives(trie) + "[^\n]*")


def _alternatives(node: Trie) -> str:
    options = [re.escape(char) + _alternatives(child) for char, child in node.items() if char]
    if len(options) == 1:
        return options[0]
    return f"(?:{'|'.join(options)})" if options else ""


def reach(old: Tokenizer, grown: Tokenizer) -> Reach | str | None:
    """The lines `grown` (`old`, or `old` with pieces appended) can encode otherwise; a str:
    why every line must be encoded again to be sure; None: `grown` is no growth of `old`."""
    if not (isinstance(old, SubwordTokenizer) and isinstance(grown, SubwordTokenizer)):
        return None
    if grown.model == old.model and grown.lowercase == old.lowercase:
        return Reach(grown, ())
    if not extends(grown, old) or grown.lowercase != old.lowercase:
        return None
    added = grown.id_to_token(range(old.vocab_size, grown.vocab_size))
    if not is_bpe(old.model):
        scores, before = normal_scores(grown.model)[-len(added) :], normal_scores(old.model)
        if any(not min(before) <= s <= max(before) for s in scores):
            return "a unigram piece was added with a score outside the old pieces' range"
    return Reach(grown, added)
