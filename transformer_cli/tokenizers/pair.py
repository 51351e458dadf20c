"""The tokenizers a model translates with: `TokenizerPair` (source and target sides, one
shared SentencePiece model when the vocabulary is joint, and the source truecaser,
tokenizers/truecase.py), serialized to a plain dict (for checkpoints) or a folder; fitting them on
training text. The kinds of tokenizer are in their own modules (their interface:
contracts/tokenizer.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contracts.tokenizer import Chunk, Tokenizer
from ..errors import first_line
from .base import sample_pairs, tokenizer_from_state
from .text_marks import strip_marks
from .truecase import Truecaser
from .vocab import Framing


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
        sides = (
            {"joint": True, "shared": self.src.state()}
            if self.joint
            else {"joint": False, "src": self.src.state(), "tgt": self.tgt.state()}
        )
        return sides if self.recaser is None else {**sides, "source_truecaser": self.recaser.state()}

    def vocabulary_digest(self) -> str:
        """See `vocabulary_digest`."""
        return vocabulary_digest(self.state())

    def same_vocabulary(self) -> bool:
        """Whether both sides give a token the same id (a joint vocabulary, or two equal ones):
        what sharing one embedding matrix needs (model.share_embeddings)."""
        if self.joint:
            return True
        sizes = self.src.vocab_size, self.tgt.vocab_size
        return sizes[0] == sizes[1] and self.src.id_to_token(range(sizes[0])) == self.tgt.id_to_token(range(sizes[1]))

    @property
    def framing(self) -> Framing:
        """The two vocabularies' special ids, as batches are built with them."""
        return Framing(self.src.ids, self.tgt.ids)

    def recase_sources(self, lines: list[str]) -> list[str]:
        """Sources with their casing restored where they have none (see tokenizers/truecase.py)."""
        return lines if self.recaser is None else [self.recaser.recase(line) for line in lines]

    def encode_sources(self, lines: list[str], recase: bool) -> list[list[int]]:
        """Source ids per line (no `<eos>`, not truncated), recased first when `recase` is on;
        tfm's training marks (tokenizers/text_marks.py) are no input: they are left out."""
        lines = [strip_marks(line) for line in lines]
        return self.src.encode_batch(self.recase_sources(lines) if recase else lines)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TokenizerPair:
        """Rebuild from `state()`; anything malformed (a damaged or crafted file) is a ValueError."""
        try:
            recaser = Truecaser.from_state(state["source_truecaser"]) if "source_truecaser" in state else None
            if state["joint"]:
                shared = tokenizer_from_state(state["shared"])
                return cls(shared, shared, joint=True, recaser=recaser)
            return cls(tokenizer_from_state(state["src"]), tokenizer_from_state(state["tgt"]), recaser=recaser)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError, OSError) as e:
            raise ValueError(f"malformed tokenizer state ({type(e).__name__}: {first_line(e)})") from None

    def save(self, folder: Path, name: str = "tokenizer.json") -> None:
        """Human-inspectable files: `name` (+ the SentencePiece .model files beside it)."""
        meta = self.state()
        prefix = "" if name == "tokenizer.json" else f"{Path(name).stem}."
        for side in ("shared", "src", "tgt"):
            part = meta.get(side)
            if part is not None and "model" in part:
                model_name = f"{prefix}spm.{side}.model"
                (folder / model_name).write_bytes(part["model"])
                meta[side] = {**part, "model": model_name}
        (folder / name).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, name: str = "tokenizer.json") -> TokenizerPair:
        meta = json.loads((folder / name).read_text(encoding="utf-8"))
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


@dataclass
class LinesText:
    """Training text held in memory, as tokenizers are fitted on it (base.TrainingText)."""

    sources: Sequence[str]
    targets: Sequence[str]
    workers: int = 1
    reserved: tuple[str, ...] = ()

    def sample(self, size: int) -> Chunk:
        return sample_pairs(iter([(list(self.sources), list(self.targets))]), size)

    def map(self, fn: Callable[[Chunk], Any], setup: Callable[..., None], args: tuple[Any, ...]) -> Iterator[Any]:
        setup(*args)
        yield fn((list(self.sources), list(self.targets)))
