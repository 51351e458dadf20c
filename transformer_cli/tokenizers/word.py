"""`WordTokenizer`: spaCy's rule-based tokenizer (`spacy.blank(lang)`, no model download) plus
a `Vocab`, the notebook's pipeline. Detokenization is learned from the training data: spaCy
records whether each token was followed by a space, so tokens that usually attach to their
neighbour (".", ",", "'s", "(") are rejoined without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import TokenizerConfig
from ..contracts.tokenizer import Chunk, ProgressCallback, Tokenizer, TrainingText
from ..errors import UsageError
from .base import strip_specials
from .vocab import SPECIALS, Vocab


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


class WordTokenizer(Tokenizer):
    """spaCy word tokens + vocabulary, optional lowercasing, learned detokenization."""

    kind = "spacy"

    def __init__(
        self, lang: str, vocab: Vocab, lowercase: bool, attach_left: Sequence[str], attach_right: Sequence[str]
    ):
        self.lang = lang
        self.vocab, self.ids = vocab, vocab.ids
        self.lowercase = lowercase
        self.attach_left = frozenset(attach_left)
        self.attach_right = frozenset(attach_right)
        self._nlp: Any = None  # a spacy.Language, made on first use

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _tokenizer(self) -> Any:  # a spacy Tokenizer
        if self._nlp is None:
            import spacy

            try:
                self._nlp = spacy.blank(self.lang)
            except ImportError as e:
                raise UsageError(f"spaCy has no tokenizer for language '{self.lang}': {e}") from None
        return self._nlp.tokenizer

    def _docs(self, lines: Sequence[str], progress: ProgressCallback | None) -> Iterator[list[Any]]:
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
    def fit(cls, cfg: TokenizerConfig, langs: tuple[str, str], text: TrainingText) -> tuple[Tokenizer, Tokenizer]:
        """Vocabularies and detokenization rules from counts over the whole training text,
        counted chunk by chunk in the workers."""
        totals = (WordCounts.empty(), WordCounts.empty())
        for src_counts, tgt_counts in text.map(_count, _count_setup, (langs, cfg.lowercase)):
            totals[0].add(src_counts)
            totals[1].add(tgt_counts)
        return cls.from_counts(langs[0], totals[0], cfg, text.reserved), cls.from_counts(langs[1], totals[1], cfg)

    @classmethod
    def blank(cls, lang: str, lowercase: bool) -> WordTokenizer:
        """A tokenizer with no vocabulary yet: for `count`."""
        return cls(lang, Vocab(SPECIALS), lowercase, (), ())

    @classmethod
    def from_counts(
        cls, lang: str, counts: WordCounts, cfg: TokenizerConfig, reserved: Sequence[str] = ()
    ) -> WordTokenizer:
        """The vocabulary and detokenization rules learned from the training text's counts
        (`reserved`: tokens it holds whatever the counts)."""
        vocab = Vocab.from_counts(counts.tokens, cfg.min_freq, cfg.max_vocab, reserved)
        # A token attaches on a side when, next to a word on that side, it was mostly written
        # without a space: "." and "'s" attach left, "(" attaches right.
        left_total: Counter[str] = Counter()
        left_glued: Counter[str] = Counter()
        right_total: Counter[str] = Counter()
        right_glued: Counter[str] = Counter()
        for (a, b, space), n in counts.gaps.items():
            if _is_word(a):
                left_total[b] += n
                left_glued[b] += 0 if space else n
            if _is_word(b):
                right_total[a] += n
                right_glued[a] += 0 if space else n
        in_vocab = [t for t in vocab.itos if t not in SPECIALS]
        return cls(
            lang,
            vocab,
            cfg.lowercase,
            [t for t in in_vocab if left_glued[t] * 2 > left_total[t]],
            [t for t in in_vocab if right_glued[t] * 2 > right_total[t]],
        )

    def decode(self, ids: Sequence[int]) -> str:
        out: list[str] = []
        glue_next = True  # no space before the first token
        open_quote = False
        for token in self.vocab.tokens(strip_specials(ids, self.ids)):
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
        return {
            "kind": self.kind,
            "lang": self.lang,
            "lowercase": self.lowercase,
            "itos": self.vocab.itos,
            "attach_left": sorted(self.attach_left),
            "attach_right": sorted(self.attach_right),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WordTokenizer:
        return cls(state["lang"], Vocab(state["itos"]), state["lowercase"], state["attach_left"], state["attach_right"])


_counters: tuple[WordTokenizer, WordTokenizer] | None = None  # in a counting worker


def _count_setup(langs: tuple[str, str], lowercase: bool) -> None:
    """Per worker process: blank tokenizers to count with."""
    global _counters
    _counters = (WordTokenizer.blank(langs[0], lowercase), WordTokenizer.blank(langs[1], lowercase))


def _count(chunk: Chunk) -> tuple[WordCounts, WordCounts]:
    """What the source and target word tokenizers learn from this chunk."""
    assert _counters is not None, "_count_setup() first"
    return _counters[0].count(chunk[0]), _counters[1].count(chunk[1])
