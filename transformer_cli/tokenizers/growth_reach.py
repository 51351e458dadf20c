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

from collections.abc import Sequence

import numpy as np

from ..contracts.tokenizer import Tokenizer
from .growth import extends, is_bpe, normal_scores
from .subword import SubwordTokenizer


class Reach:
    """The added pieces of one side's grown vocabulary, to find the lines they can change."""

    def __init__(self, grown: SubwordTokenizer, added: Sequence[str]):
        self.grown, self.added = grown, tuple(added)

    def touched(self, lines: Sequence[str]) -> np.ndarray:
        """[len(lines)] bool: whether each line's normalized text holds an added piece."""
        if not self.added:
            return np.zeros(len(lines), dtype=bool)
        text = self.grown.sp.normalize([line.lower() if self.grown.lowercase else line for line in lines])
        ends = np.cumsum([len(t) + 1 for t in text])  # where each line's "\n" stands in `joined`
        joined = "\n".join(text)  # (no piece holds a line break)
        hit = np.zeros(len(lines), dtype=bool)
        for piece in self.added:
            at = joined.find(piece)
            while at >= 0:
                k = int(np.searchsorted(ends, at, side="right"))
                hit[k] = True
                at = joined.find(piece, int(ends[k]))  # the next line
        return hit


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
