"""train.retrain.grow_vocabulary: a continued night adds subword pieces to the published
model's vocabulary, and the model grows embedding rows for them.

A continued run encodes its data with the parent's tokenizers, fitted on the corpus the model
was first trained on. A topic that arrives later (the corrections of one client's domain) is
then spelled in fragments: on Multi30k without its dog sentences, "Hund" is `▁H` `und` and the
topic takes 11% more pieces than under a tokenizer fitted with it (docs/results.md). When the
night continues the parent (train.retrain's decision), a tokenizer is fitted on the night's
training text (the corpus's training pairs and its parts: corrections, synthetic text; a
seeded sample of tokenizer.fit_sample pairs when there are more, read as a stream) with the
parent's tokenizer settings; the pieces it has and the parent lacks, used at least
new_piece_min_count times in that text (at most max_new_pieces, the most used), are appended to the
parent's SentencePiece models (tokenizers/growth.py): every old id keeps its piece. The
night's data, encoded with the parent's tokenizers to decide, is then encoded again only
where the added pieces occur (data/grown_folder.py, tokenizers/growth_reach.py).

The added pieces are stored in the run folder's vocabulary.json with the parent's sha256, so
the run's later sessions (a resume after a kill) and the commands that prepare its data encode
with the same tokenizers; a night on another parent, or one that adds nothing, ignores or
removes it. The model's vocabulary-sized weights (embeddings, the output projection and its
bias: every weight whose first dimension is a vocabulary's size) keep their rows and grow one
per new piece, started as the mean of the rows of the old pieces that spell it (the "fast
vocabulary transfer" of Gee et al., 2022). The promotion gate then compares the night with the
published model by BLEU, as for any two models whose tokenizers differ.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

from ..config import Config, TokenizerConfig
from ..contracts.tokenizer import Chunk
from ..data.prepared import Prepared
from ..errors import UsageError
from ..fsutil import atomic_write_text
from ..host.machine import available_cpus
from ..tokenizers.base import sample_pairs
from ..tokenizers.growth import Growth, GrowthRule, appended, new_pieces, scored, tiling
from ..tokenizers.pair import LinesText, TokenizerPair
from ..tokenizers.subword import SubwordTokenizer
from .mix_plan import mix_plan
from .run_dir import RunDir

log = logging.getLogger("tfm")

Scored = list[tuple[str, float]]


def stored_growth(run: RunDir, parent: TokenizerPair, parent_sha256: str) -> TokenizerPair | None:
    """`parent`'s tokenizers with the pieces the run folder stores for this parent (None: none
    stored for it, or an unreadable store: the night decides again)."""
    try:
        raw = json.loads(run.vocabulary.read_text(encoding="utf-8"))
        if raw["parent_sha256"] != parent_sha256:
            return None
        sides = {side: [(str(p), float(s)) for p, s in pieces] for side, pieces in raw["added"].items()}
        return _grown(parent, sides)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


def grow(
    cfg: Config, run: RunDir, parent: TokenizerPair, parent_sha256: str, settings: TokenizerConfig, prepared: Prepared
) -> TokenizerPair:
    """`parent`'s tokenizers grown on `prepared`'s training text (encoded with them or with an
    earlier growth of them), stored in `run` (or the store removed when nothing is added): the
    tokenizers the night's data is encoded with. One line in train.log says what was added."""
    if not (parent.src.grows and parent.tgt.grows):
        log.warning(
            "warning: train.retrain.grow_vocabulary: the published model's tokenizer (%s) cannot grow: "
            "its vocabulary is kept",
            parent.src.kind,
        )
        run.vocabulary.unlink(missing_ok=True)
        return parent
    rule = GrowthRule(cfg.train.retrain.new_piece_min_count, cfg.train.retrain.max_new_pieces)
    seen = Counter[str]()
    sources, targets = sample_pairs(_text(prepared, seen), settings.fit_sample)
    reserved = mix_plan(cfg).specials()
    fitted = SubwordTokenizer.fit(settings, prepared.langs, LinesText(sources, targets, available_cpus(), reserved))
    sides = ("shared",) if parent.joint else ("src", "tgt")
    texts = {"shared": [*sources, *targets], "src": sources, "tgt": targets}
    olds = dict(zip(sides, (_subword(parent.src), _subword(parent.tgt))))
    fits = dict(zip(sides, (_subword(fitted[0]), _subword(fitted[1]))))
    growths = {side: new_pieces(olds[side], fits[side], texts[side], rule) for side in sides}
    added = {side: scored(olds[side], fits[side], growths[side].added) for side in sides}
    log.info("%s", _line(growths, parent, len(sources), seen["pairs"], rule))
    if not any(added.values()):
        run.vocabulary.unlink(missing_ok=True)
        return parent
    record = {"parent_sha256": parent_sha256, "added": added}
    atomic_write_text(run.vocabulary, json.dumps(record, ensure_ascii=False) + "\n")
    return _grown(parent, added)


def _text(prepared: Prepared, seen: Counter[str]) -> Iterator[Chunk]:
    """The night's training text, the corpus's and its parts', chunk by chunk (counted in `seen`)."""
    for name in ["train", *prepared.manifest.parts]:
        for chunk in prepared.text_pairs(name):
            seen["pairs"] += len(chunk[0])
            yield chunk


def _grown(parent: TokenizerPair, added: dict[str, Scored]) -> TokenizerPair:
    if parent.joint:
        shared = appended(_subword(parent.src), added["shared"])
        return TokenizerPair(shared, shared, joint=True)
    return TokenizerPair(appended(_subword(parent.src), added["src"]), appended(_subword(parent.tgt), added["tgt"]))


def _subword(tokenizer: Any) -> SubwordTokenizer:
    # a type, not a capability (`grows` is asked above): growth edits the SentencePiece model's bytes
    if not isinstance(tokenizer, SubwordTokenizer):
        raise TypeError(f"a {tokenizer.kind} tokenizer does not grow")
    return tokenizer


def _line(growths: dict[str, Growth], parent: TokenizerPair, sample: int, pairs: int, rule: GrowthRule) -> str:
    """train.log's line: per side, how many pieces were added, which, and what was left out."""
    parts = []
    for side, g in growths.items():
        size = (parent.tgt if side == "tgt" else parent.src).vocab_size
        named = ", ".join(g.added[:8]) + (", ..." if len(g.added) > 8 else "")
        parts.append(
            f"{side} {size:,} -> {size + len(g.added):,} pieces"
            + (f" ({named})" if g.added else "")
            + f"; left out: {g.too_rare} used fewer than {rule.min_count} times, {g.over_cap} beyond {rule.max_pieces}"
        )
    fitted = f"{pairs:,}" if sample == pairs else f"a sample of {sample:,} of {pairs:,}"
    return f"vocabulary: fitted on the night's {fitted} training pairs: " + "; ".join(parts)


def grown_weights(
    weights: dict[str, Tensor], parent: TokenizerPair, pair: TokenizerPair, model: Mapping[str, Tensor]
) -> dict[str, Tensor]:
    """The parent's `weights` for a model built for `pair` (the parent's tokenizers grown),
    whose state dict is `model`:
    each vocabulary-sized weight (first dimension) keeps its rows and gains one per new piece,
    the mean of the rows of the parent's pieces that spell it. A weight of another shape that
    differs is a UsageError naming it."""
    shapes = {name: tensor.shape for name, tensor in model.items()}
    sides = {"src": (parent.src, pair.src), "tgt": (parent.tgt, pair.tgt)}
    out = dict(weights)
    for name, tensor in weights.items():
        shape = shapes.get(name)
        if shape is None or shape == tensor.shape:
            continue
        side = "src" if name.startswith("encoder.") else "tgt"
        old, new = sides[side]
        if tensor.shape[0] != old.vocab_size or shape[0] != new.vocab_size or shape[1:] != tensor.shape[1:]:
            raise UsageError(
                f"train.retrain.grow_vocabulary: the published model's weight {name} {tuple(tensor.shape)} "
                f"does not grow to {tuple(shape)} with its vocabulary"
            )
        out[name] = _with_rows(tensor, _subword(old), new.id_to_token(range(old.vocab_size, new.vocab_size)))
    return out


def _with_rows(tensor: Tensor, old: SubwordTokenizer, pieces: list[str]) -> Tensor:
    """[old vocab, ...] -> [old vocab + len(pieces), ...]: a row per piece, the mean of the rows
    of the old pieces that spell it."""
    rows = [tensor[tiling(old, piece)].mean(dim=0) for piece in pieces]
    return torch.cat([tensor, torch.stack(rows).to(tensor.dtype)]) if rows else tensor
