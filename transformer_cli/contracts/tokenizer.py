"""What a tokenizer is: `Tokenizer`, one seams.TOKENIZERS entry (a kind: the class), text of
one language to ids and back; where its vocabulary keeps the special tokens (`SpecialIds`:
its `ids`, which the model, search, batching and the loss use); and the text a kind is fitted
on (`TrainingText`). The kinds are tokenizers/'s (word.py, subword.py, piece_vocab.py) or a
plugin's; a saved state is rebuilt by its kind (tokenizers/base.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import UsageError

if TYPE_CHECKING:
    from ..config_sections import TokenizerConfig

ProgressCallback = Callable[[int], None]
Chunk = tuple[list[str], list[str]]  # source lines, target lines


@dataclass(frozen=True)
class SpecialIds:
    """The ids of one vocabulary's special tokens."""

    unk: int
    pad: int
    sos: int  # starts every target sequence (the decoder's first input)
    eos: int  # ends every source and target sequence


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
