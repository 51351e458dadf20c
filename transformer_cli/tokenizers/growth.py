"""Growing a SentencePiece vocabulary without moving any id: the pieces a model fitted on
today's text has and an older model lacks, appended after the older model's pieces.

A SentencePiece model is a serialized `ModelProto` whose pieces are its repeated field 1, in id
order. Protocol buffers append a repeated field's entries in the order they come on the wire,
wherever they come, so new `SentencePiece` entries written after the serialized old model take
the ids after its last: every old id keeps its piece, and a model trained with the old
vocabulary keeps its embedding rows. The model's other fields (its normalizer, its training
settings) stay as they were; SentencePiece does not check the recorded vocabulary size.

How a new piece competes with the old ones depends on the model's type:
- BPE merges the adjacent pair whose concatenation is a piece of the highest score. New pieces
  get scores below the old model's lowest, in the fitted model's merge order: old merges all
  happen first, so the old text keeps its segmentation except where a new piece joins pieces
  the old model left apart ("▁H" "und" -> "▁Hund"). A new piece the old pieces that spell it
  cannot reach in one join comes with the pieces of the joins between (`new_pieces`).
- Unigram takes the segmentation with the highest total score (log-probability). New pieces
  keep the fitted model's scores, fitted on nearly the same text as the old ones.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..contracts.tokenizer import Tokenizer
from .subword import SubwordTokenizer

BPE = 2  # sentencepiece_model.proto: TrainerSpec.ModelType (UNIGRAM = 1, the default)
NORMAL = 1  # ModelProto.SentencePiece.Type, the default


@dataclass(frozen=True)
class GrowthRule:
    """Which of a fitted model's pieces are added: those the old model lacks that the fitted
    one uses at least `min_count` times on the text, the `max_pieces` most used."""

    min_count: int
    max_pieces: int


@dataclass(frozen=True)
class Growth:
    """What a growth added and left out."""

    added: tuple[str, ...]  # in their new ids' order
    too_rare: int  # new pieces used fewer than min_count times
    over_cap: int  # frequent enough, beyond max_pieces
    joins: int = 0  # of `added`, BPE's steps towards a new piece from the old pieces that spell it


def new_pieces(old: SubwordTokenizer, fitted: SubwordTokenizer, lines: Sequence[str], rule: GrowthRule) -> Growth:
    """The pieces of `fitted` that `old` lacks, counted in `fitted`'s segmentation of `lines`;
    those the rule keeps, in `fitted`'s id order (its merge order for BPE). A BPE model merges
    two adjacent pieces at a time, so each new piece comes with the joins that reach it from
    the old model's spelling of it: `▁p` `u` `de` `l` -> `▁pu`, `▁pude`, `▁pudel`."""
    known = {old.sp.id_to_piece(i) for i in range(old.vocab_size)}
    candidates = {
        i
        for i in range(fitted.vocab_size)
        if not (fitted.sp.is_control(i) or fitted.sp.is_unknown(i) or fitted.sp.is_unused(i))
        and fitted.sp.id_to_piece(i) not in known
    }
    counts: Counter[int] = Counter(i for ids in fitted.encode_batch(lines) for i in ids if i in candidates)
    frequent = [i for i, n in counts.items() if n >= rule.min_count]
    most_used = sorted(frequent, key=lambda i: (-counts[i], i))[: rule.max_pieces]
    kept = [fitted.sp.id_to_piece(i) for i in sorted(most_used)]
    added = kept
    if is_bpe(old.model):
        added = list(dict.fromkeys(j for piece in kept for j in _joins(old, piece) if j not in known))
    return Growth(tuple(added), len(candidates) - len(frequent), len(frequent) - len(kept), len(added) - len(kept))


def _joins(old: SubwordTokenizer, piece: str) -> list[str]:
    """The pieces that join the old BPE model's spelling of `piece` left to right, ending with it."""
    spelled = bpe_spelling(old, piece)
    return ["".join(spelled[: k + 1]) for k in range(1, len(spelled))] or [piece]


def bpe_spelling(tokenizer: SubwordTokenizer, text: str) -> list[str]:
    """`text` (a piece, or part of a word) as a BPE model's merges spell it, the way
    SentencePiece does: the adjacent pair whose concatenation is the piece of the highest
    score is merged first, until no pair is a piece."""
    symbols = list(text)
    while len(symbols) > 1:
        best: tuple[float, int] | None = None
        for k in range(len(symbols) - 1):
            i = tokenizer.sp.piece_to_id(symbols[k] + symbols[k + 1])
            if i == tokenizer.ids.unk or tokenizer.sp.is_control(i):
                continue
            score = tokenizer.sp.get_score(i)
            if best is None or score > best[0]:
                best = (score, k)
        if best is None:
            break
        k = best[1]
        symbols[k : k + 2] = [symbols[k] + symbols[k + 1]]
    return symbols


def scored(old: SubwordTokenizer, fitted: SubwordTokenizer, pieces: Sequence[str]) -> list[tuple[str, float]]:
    """`pieces` (of `fitted`) with the scores they take in `old` (see the module's docstring)."""
    if is_bpe(old.model):
        lowest = min(old.sp.get_score(i) for i in range(old.vocab_size))
        return [(p, lowest - 1.0 - k) for k, p in enumerate(pieces)]
    return [(p, fitted.sp.get_score(fitted.sp.piece_to_id(p))) for p in pieces]


def appended(old: SubwordTokenizer, pieces: Sequence[tuple[str, float]]) -> SubwordTokenizer:
    """`old` with `pieces` (piece, score) appended: ids 0..old.vocab_size-1 unchanged."""
    entries = b"".join(_field(1, _field(1, p.encode("utf-8")) + _float_field(2, s)) for p, s in pieces)
    return SubwordTokenizer(old.model + entries, old.lowercase)


def extends(new: Tokenizer, old: Tokenizer) -> bool:
    """Whether `new` has `old`'s pieces at the same ids, and more (a growth of it)."""
    n = old.vocab_size
    return new.kind == old.kind and new.vocab_size > n and new.id_to_token(range(n)) == old.id_to_token(range(n))


def tiling(tokenizer: SubwordTokenizer, piece: str) -> list[int]:
    """Ids of `tokenizer`'s pieces that spell `piece`, longest match first (a character it
    lacks: its <unk>): what a new piece's embedding starts from."""
    ids, start = [], 0
    while start < len(piece):
        for end in range(len(piece), start, -1):
            i = tokenizer.sp.piece_to_id(piece[start:end])
            if i != tokenizer.ids.unk and not tokenizer.sp.is_control(i):
                break
        else:
            i, end = tokenizer.ids.unk, start + 1
        ids.append(i)
        start = end
    return ids


# -- the protocol buffers wire format, as far as these two fields need it
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _float_field(number: int, value: float) -> bytes:
    """A float field (wire type 5)."""
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _entries(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """A message's top-level fields in wire order: (number, value), a varint's value as an int,
    any other's payload as bytes (a float's: its 4 little-endian bytes)."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
            yield number, value
            continue
        if wire == 2:
            size, at = _read_varint(data, at)
        else:
            size = {1: 8, 5: 4}[wire]
        yield number, data[at : at + size]
        at += size


def _fields(data: bytes) -> dict[int, int | bytes]:
    """A message's top-level fields (the last of a repeated one)."""
    return dict(_entries(data))


def is_bpe(model: bytes) -> bool:
    """Whether a SentencePiece model is BPE: ModelProto.trainer_spec (field 2).model_type
    (field 3); UNIGRAM when not recorded."""
    spec = _fields(model).get(2, b"")
    kind = _fields(spec).get(3, 1) if isinstance(spec, bytes) else 1
    return kind == BPE


def normal_scores(model: bytes) -> list[float]:
    """The scores of a SentencePiece model's NORMAL pieces (ModelProto.pieces, field 1: score 2,
    type 3): those a unigram encoder takes its lowest and highest score from, not control,
    unknown, user-defined, unused or byte pieces."""
    scores = []
    for number, piece in _entries(model):
        if number == 1 and isinstance(piece, bytes):
            fields = _fields(piece)
            score = fields.get(2, b"\0\0\0\0")
            if fields.get(3, NORMAL) == NORMAL and isinstance(score, bytes):
                scores.append(struct.unpack("<f", score)[0])
    return scores
