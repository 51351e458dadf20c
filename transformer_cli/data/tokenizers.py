"""Tokenizers: text <-> ids for one language, behind one small interface.

- `WordTokenizer`: spaCy's rule-based tokenizer (`spacy.blank(lang)`, no model download)
  plus a `Vocab`; the notebook's pipeline. Detokenization is learned from the training data:
  spaCy records whether each token was followed by a space, so tokens that usually attach to
  their neighbour (".", ",", "'s", "(") are rejoined without one.
- `SubwordTokenizer`: SentencePiece BPE or unigram, which detokenizes exactly by design.

`TokenizerPair` holds the source and target sides (one shared SentencePiece model when the
vocabulary is joint) and the source truecaser (data/truecase.py), and serializes to a plain
dict (for checkpoints) or a folder.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import TokenizerConfig
from ..errors import UsageError
from .truecase import Truecaser
from .vocab import EOS, PAD, SOS, SPECIALS, UNK, Framing, SpecialIds, Vocab

ProgressCallback = Callable[[int], None]


@dataclass
class WordCounts:
    """What a word tokenizer learns from: token counts, and for each pair of neighbouring
    tokens how often a space stood between them. Counts of parts of a corpus add up."""

    tokens: Counter[str]
    gaps: Counter[tuple[str, str, bool]]  # (token, next token, space between)

    @classmethod
    def empty(cls) -> WordCounts:
        return cls(Counter(), Counter())

    def add(self, other: WordCounts) -> None:
        self.tokens.update(other.tokens)
        self.gaps.update(other.gaps)


def _is_word(token: str) -> bool:
    return any(c.isalnum() for c in token)


def _strip_specials(ids: Sequence[int], specials: SpecialIds) -> list[int]:
    """Ids up to the first `<eos>`, without `<sos>` and `<pad>`."""
    out = []
    skipped = (specials.sos, specials.pad)
    for i in ids:
        if i == specials.eos:
            break
        if i not in skipped:
            out.append(int(i))
    return out


class Tokenizer(ABC):
    """Text of one language to ids (without `<sos>`/`<eos>`) and back to natural text."""

    kind: str
    lowercase: bool  # the text is lowercased before encoding
    ids: SpecialIds  # where the vocabulary keeps `<unk>`, `<pad>`, `<sos>` and `<eos>`

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]:
        ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """Natural text for `ids`; stops at `<eos>`, skips `<sos>`/`<pad>`."""

    @abstractmethod
    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        """Token strings, for display (attention plots)."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Plain-data state (str, int, list, bytes): loadable with torch weights_only."""

    def encode(self, line: str) -> list[int]:
        return self.encode_batch([line])[0]


class WordTokenizer(Tokenizer):
    """spaCy word tokens + vocabulary, optional lowercasing, learned detokenization."""

    kind = "spacy"

    def __init__(self, lang: str, vocab: Vocab, lowercase: bool, attach_left: Sequence[str],
                 attach_right: Sequence[str]):
        self.lang = lang
        self.vocab, self.ids = vocab, vocab.ids
        self.lowercase = lowercase
        self.attach_left = frozenset(attach_left)
        self.attach_right = frozenset(attach_right)
        self._nlp = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _tokenizer(self):
        if self._nlp is None:
            import spacy

            try:
                self._nlp = spacy.blank(self.lang)
            except ImportError as e:
                raise UsageError(f"spaCy has no tokenizer for language '{self.lang}': {e}") from None
        return self._nlp.tokenizer

    def _docs(self, lines: Sequence[str], progress: ProgressCallback | None):
        texts = (line.lower() if self.lowercase else line for line in lines)
        for doc in self._tokenizer().pipe(texts, batch_size=1000):
            if progress:
                progress(1)
            yield [t for t in doc if not t.is_space]

    def split(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[str]]:
        return [[t.text for t in doc] for doc in self._docs(lines, progress)]

    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]:
        return [self.vocab.lookup(tokens) for tokens in self.split(lines, progress)]

    def count(self, lines: Sequence[str]) -> WordCounts:
        """What fitting needs of `lines` (see `WordCounts`)."""
        counts = WordCounts.empty()
        for doc in self._docs(lines, None):
            counts.tokens.update(t.text for t in doc)
            counts.gaps.update((a.text, b.text, bool(a.whitespace_)) for a, b in zip(doc, doc[1:]))
        return counts

    @classmethod
    def fit(cls, lang: str, lines: Sequence[str], cfg: TokenizerConfig) -> WordTokenizer:
        """Learned from `lines` in one go (preprocessing counts parts in parallel instead)."""
        return cls.from_counts(lang, cls.blank(lang, cfg.lowercase).count(lines), cfg)

    @classmethod
    def blank(cls, lang: str, lowercase: bool) -> WordTokenizer:
        """A tokenizer with no vocabulary yet: for `count`."""
        return cls(lang, Vocab(SPECIALS), lowercase, (), ())

    @classmethod
    def from_counts(cls, lang: str, counts: WordCounts, cfg: TokenizerConfig) -> WordTokenizer:
        """The vocabulary and detokenization rules learned from the training text's counts."""
        vocab = Vocab.from_counts(counts.tokens, cfg.min_freq, cfg.max_vocab)
        # A token attaches on a side when, next to a word on that side, it was mostly written
        # without a space: "." and "'s" attach left, "(" attaches right.
        left_total, left_glued, right_total, right_glued = Counter(), Counter(), Counter(), Counter()
        for (a, b, space), n in counts.gaps.items():
            if _is_word(a):
                left_total[b] += n
                left_glued[b] += 0 if space else n
            if _is_word(b):
                right_total[a] += n
                right_glued[a] += 0 if space else n
        in_vocab = [t for t in vocab.itos if t not in SPECIALS]
        return cls(lang, vocab, cfg.lowercase,
                   [t for t in in_vocab if left_glued[t] * 2 > left_total[t]],
                   [t for t in in_vocab if right_glued[t] * 2 > right_total[t]])

    def decode(self, ids: Sequence[int]) -> str:
        out: list[str] = []
        glue_next = True  # no space before the first token
        open_quote = False
        for token in self.vocab.tokens(_strip_specials(ids, self.ids)):
            if token == '"':  # ambiguous: alternate between opening and closing
                open_quote = not open_quote
                glue_left, glue_right = not open_quote, open_quote
            else:
                glue_left, glue_right = token in self.attach_left, token in self.attach_right
            if not (glue_next or glue_left):
                out.append(" ")
            out.append(token)
            glue_next = glue_right
        return "".join(out)

    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        return self.vocab.tokens(ids)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "lang": self.lang, "lowercase": self.lowercase,
                "itos": self.vocab.itos, "attach_left": sorted(self.attach_left),
                "attach_right": sorted(self.attach_right)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WordTokenizer:
        return cls(state["lang"], Vocab(state["itos"]), state["lowercase"], state["attach_left"],
                   state["attach_right"])


_SPM_TOO_BIG = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")


class SubwordTokenizer(Tokenizer):
    """SentencePiece (BPE or unigram) with tfm's special ids; optional lowercasing."""

    kind = "sentencepiece"

    def __init__(self, model: bytes, lowercase: bool):
        import sentencepiece as spm

        self.model = model
        self.lowercase = lowercase
        self.sp = spm.SentencePieceProcessor(model_proto=model)
        self.ids = SpecialIds(self.sp.unk_id(), self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id())
        self.threads = -1  # encode_batch's threads (-1: all); 1 inside a worker process

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @classmethod
    def train(cls, lines: Sequence[str], cfg: TokenizerConfig, threads: int) -> SubwordTokenizer:
        """Fit on `lines` (all of them: the caller bounds how many) with `threads` threads."""
        import sentencepiece as spm

        text = [line.lower() if cfg.lowercase else line for line in lines if line.strip()]
        buffer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(text), model_writer=buffer, model_type=cfg.model_type,
                vocab_size=cfg.vocab_size, character_coverage=cfg.character_coverage,
                unk_id=UNK, pad_id=PAD, bos_id=SOS, eos_id=EOS, unk_piece=SPECIALS[UNK],
                pad_piece=SPECIALS[PAD], bos_piece=SPECIALS[SOS], eos_piece=SPECIALS[EOS],
                input_sentence_size=0, minloglevel=2, num_threads=threads)
        except RuntimeError as e:
            match = _SPM_TOO_BIG.search(str(e))
            if match:
                raise UsageError(f"tokenizer.vocab_size={match.group(1)} is too large for this "
                                 f"training corpus: SentencePiece allows at most {match.group(2)}"
                                 ) from None
            raise UsageError(f"SentencePiece training failed: {str(e).splitlines()[0]}") from None
        return cls(buffer.getvalue(), cfg.lowercase)

    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]:
        text = [line.lower() if self.lowercase else line for line in lines]
        ids = self.sp.encode(text, num_threads=self.threads)
        if progress:
            progress(len(lines))
        return ids

    def encode_sampled(self, lines: Sequence[str], alpha: float) -> list[list[int]]:
        """One sampled segmentation per line (subword regularization): BPE-dropout with
        probability `alpha` for BPE models, sampling with smoothing `alpha` over all
        segmentations for unigram models. The draws come from SentencePiece's own generator,
        which cannot be seeded per call (google/sentencepiece#540, #609: its seed is read once
        per thread), so they differ from process to process."""
        text = [line.lower() if self.lowercase else line for line in lines]
        return self.sp.encode(text, enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=1)

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode(_strip_specials(ids, self.ids))

    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "lowercase": self.lowercase, "model": self.model}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SubwordTokenizer:
        return cls(state["model"], state["lowercase"])


def tokenizer_from_state(state: dict[str, Any]) -> Tokenizer:
    kinds: dict[str, type] = {"spacy": WordTokenizer, "sentencepiece": SubwordTokenizer}
    return kinds[state["kind"]].from_state(state)


@dataclass
class TokenizerPair:
    """Source and target tokenizers; `joint` when both sides share one vocabulary. `recaser`
    restores the casing of sources typed without any (None: models trained before it existed,
    or lowercasing tokenizers)."""

    src: Tokenizer
    tgt: Tokenizer
    joint: bool = False
    recaser: Truecaser | None = None

    def state(self) -> dict[str, Any]:
        sides = ({"joint": True, "shared": self.src.state()} if self.joint
                 else {"joint": False, "src": self.src.state(), "tgt": self.tgt.state()})
        return sides if self.recaser is None else {**sides, "source_truecaser": self.recaser.state()}

    def vocabulary_digest(self) -> str:
        """See `vocabulary_digest`."""
        return vocabulary_digest(self.state())

    @property
    def framing(self) -> Framing:
        """The two vocabularies' special ids, as batches are built with them."""
        return Framing(self.src.ids, self.tgt.ids)

    def recase_sources(self, lines: list[str]) -> list[str]:
        """Sources with their casing restored where they have none (see data/truecase.py)."""
        return lines if self.recaser is None else [self.recaser.recase(line) for line in lines]

    def encode_sources(self, lines: list[str], recase: bool) -> list[list[int]]:
        """Source ids per line (no `<eos>`, not truncated), recased first when `recase` is on."""
        return self.src.encode_batch(self.recase_sources(lines) if recase else lines)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TokenizerPair:
        """Rebuild from `state()`; anything malformed (a damaged or crafted file) is a ValueError."""
        try:
            recaser = Truecaser.from_state(state["source_truecaser"]) if "source_truecaser" in state else None
            if state["joint"]:
                shared = tokenizer_from_state(state["shared"])
                return cls(shared, shared, joint=True, recaser=recaser)
            return cls(tokenizer_from_state(state["src"]), tokenizer_from_state(state["tgt"]),
                       recaser=recaser)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError, OSError) as e:
            first = str(e).splitlines()[0] if str(e) else ""
            raise ValueError(f"malformed tokenizer state ({type(e).__name__}: {first})") from None

    def save(self, folder: Path) -> None:
        """Human-inspectable files: tokenizer.json (+ the SentencePiece .model files)."""
        meta = self.state()
        for side in ("shared", "src", "tgt"):
            part = meta.get(side)
            if part is not None and "model" in part:
                model_name = f"spm.{side}.model"
                (folder / model_name).write_bytes(part["model"])
                meta[side] = {**part, "model": model_name}
        (folder / "tokenizer.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> TokenizerPair:
        meta = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        for side in ("shared", "src", "tgt"):
            part = meta.get(side)
            if part is not None and "model" in part:
                meta[side] = {**part, "model": (folder / part["model"]).read_bytes()}
        return cls.from_state(meta)


def vocabulary_digest(state: dict[str, Any]) -> str:
    """sha256 of a `TokenizerPair.state()`'s vocabularies and segmentation, not its truecaser:
    pairs with one digest give a text the same ids, so their models' losses compare."""
    plain = {k: v for k, v in state.items() if k != "source_truecaser"}
    text = json.dumps(plain, sort_keys=True, default=lambda b: b.hex())  # bytes: SentencePiece models
    return hashlib.sha256(text.encode()).hexdigest()


def fit_subwords(cfg: TokenizerConfig, src_lines: Sequence[str], tgt_lines: Sequence[str],
                 threads: int) -> TokenizerPair:
    """SentencePiece models learned from (a sample of) the training text."""
    if cfg.joint:
        shared = SubwordTokenizer.train([*src_lines, *tgt_lines], cfg, threads)
        return TokenizerPair(shared, shared, joint=True)
    return TokenizerPair(SubwordTokenizer.train(src_lines, cfg, threads),
                         SubwordTokenizer.train(tgt_lines, cfg, threads))


def fit_tokenizers(cfg: TokenizerConfig, src_lang: str, tgt_lang: str, src_lines: Sequence[str],
                   tgt_lines: Sequence[str], threads: int = 1) -> TokenizerPair:
    """Tokenizers learned from training text held in memory."""
    if cfg.kind == "spacy":
        return TokenizerPair(WordTokenizer.fit(src_lang, src_lines, cfg),
                             WordTokenizer.fit(tgt_lang, tgt_lines, cfg))
    return fit_subwords(cfg, src_lines, tgt_lines, threads)
