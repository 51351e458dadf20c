"""The tokenizer interface: text of one language to ids and back, and the kinds of tokenizer
by name (`TOKENIZERS`), through which a saved tokenizer state is rebuilt.

The kinds are one module each: tokenizers/word.py (spaCy words + a vocabulary),
tokenizers/subword.py (SentencePiece), tokenizers/piece_vocab.py (SentencePiece
pieces looked up in a separate vocabulary, as Marian models keep them). tokenizers/pair.py
holds the pair a model translates with.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import UsageError
from ..seams import TOKENIZERS
from .vocab import SpecialIds

if TYPE_CHECKING:
    from ..config import TokenizerConfig

ProgressCallback = Callable[[int], None]
Chunk = tuple[list[str], list[str]]  # source lines, target lines
SAMPLE_SEED = 0  # the sample a tokenizer is fitted on is the same on every run


class TrainingText(Protocol):
    """What fitting reads of a training corpus, however large (data/preprocess.py's stream of
    chunks, or lines held in memory): a bounded sample, or a function of every chunk computed
    in worker processes."""

    workers: int  # processes (and threads) fitting may use
    # Marks the vocabularies must hold as tokens of their own, though the text may not show
    # them (tokenizers/text_marks.py: the tags a mix of sources puts in front at batch time).
    reserved: tuple[str, ...]

    def sample(self, size: int) -> Chunk:
        """A seeded uniform sample of at most `size` pairs (all of them when there are fewer)."""

    def map(self, fn: Callable[[Chunk], Any], setup: Callable[..., None], args: tuple[Any, ...]) -> Iterator[Any]:
        """`fn` of every chunk, in order, in processes each set up once by `setup(*args)`."""


def sample_pairs(chunks: Iterator[Chunk], size: int, check_stop: Callable[[], None] | None = None) -> Chunk:
    """A seeded uniform sample of at most `size` pairs (all of them, in order, when there are
    no more): reservoir sampling, so memory holds the sample only."""
    rng = random.Random(SAMPLE_SEED)
    sources: list[str] = []
    targets: list[str] = []
    seen = 0
    for chunk in chunks:
        if check_stop is not None:
            check_stop()
        for a, b in zip(*chunk):
            if seen < size:
                sources.append(a)
                targets.append(b)
            else:
                j = rng.randrange(seen + 1)
                if j < size:
                    sources[j], targets[j] = a, b
            seen += 1
    return sources, targets


def strip_specials(ids: Sequence[int], specials: SpecialIds) -> list[int]:
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
    """Text of one language to ids (without `<sos>`/`<eos>`) and back to natural text.

    Beside the abstract methods, capabilities a kind may have, which callers ask for instead
    of checking types: `samples` (`encode_sampled` draws segmentations: subword
    regularization), `grows` (pieces can be appended to its vocabulary, every old id keeping
    its piece: train.retrain.grow_vocabulary) and `set_threads` (how many threads
    `encode_batch` may use: one inside a worker process, where the processes are the
    parallelism).
    """

    kind: str
    lowercase: bool  # the text is lowercased before encoding
    ids: SpecialIds  # where the vocabulary keeps `<unk>`, `<pad>`, `<sos>` and `<eos>`
    samples = False  # whether encode_sampled draws other segmentations than encode_batch
    grows = False  # whether its vocabulary takes appended pieces (tokenizers/growth.py)
    # A kind's own keys: the dataclass tokenizer.options is read with (None: it takes none);
    # `fit` gets them as TOKENIZERS.options(cfg.kind, cfg.options).
    settings: ClassVar[type | None] = None

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """Natural text for `ids`; stops at `<eos>`, skips `<sos>`/`<pad>`."""

    @abstractmethod
    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        """Token strings, for display (attention plots)."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Plain-data state (str, int, list, bytes): loadable with torch weights_only."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: dict[str, Any]) -> Tokenizer:
        """Rebuild from `state()`."""

    def encode(self, line: str) -> list[int]:
        return self.encode_batch([line])[0]

    def encode_sampled(self, lines: Sequence[str], alpha: float) -> list[list[int]]:
        """A sampled segmentation per line, with smoothing or dropout `alpha` (kinds that
        `samples`); others have one segmentation: encode_batch's."""
        return self.encode_batch(lines)

    @classmethod
    def fit(cls, cfg: TokenizerConfig, langs: tuple[str, str], text: TrainingText) -> tuple[Tokenizer, Tokenizer]:
        """The source and target tokenizers of this kind learned from `text` (one object twice:
        a joint vocabulary). A kind that is never fitted says so (it comes with a model)."""
        raise UsageError(
            f"a {cls.kind} tokenizer is not fitted on a corpus: it comes with a trained model (train.init_from)"
        )

    def set_threads(self, threads: int) -> None:  # noqa: B027 - optional: most kinds have none
        """Threads encode_batch may use (-1: all); a kind without threads ignores it."""


def tokenizer_from_state(state: dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from its `state()` (by its kind; an unknown one is a ValueError)."""
    kind: type[Tokenizer] | None = TOKENIZERS.find(state["kind"])
    if kind is None:
        raise ValueError(f"unknown tokenizer kind {state['kind']!r} (known: {', '.join(TOKENIZERS.names())})")
    return kind.from_state(state)
