"""`SubwordTokenizer`: SentencePiece BPE or unigram with tfm's special ids, which detokenizes
exactly by design; optional lowercasing and subword sampling."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from ..config import TokenizerConfig
from ..contracts.tokenizer import ProgressCallback, SpecialIds, Tokenizer, TrainingText
from ..errors import UsageError, first_line
from .base import strip_specials
from .vocab import EOS, PAD, SOS, SPECIALS, UNK

WORD_START = "\u2581"  # SentencePiece's word boundary
_SPM_TOO_BIG = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")


class SubwordTokenizer(Tokenizer):
    """SentencePiece (BPE or unigram) with tfm's special ids; optional lowercasing."""

    kind = "sentencepiece"
    samples = True
    grows = True

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
    def train(
        cls, lines: Sequence[str], cfg: TokenizerConfig, threads: int, reserved: Sequence[str] = ()
    ) -> SubwordTokenizer:
        """Fit on `lines` (all of them: the caller bounds how many) with `threads` threads;
        `reserved` marks become pieces of their own, each with the word boundary in front
        (`▁<mark>`): a mark stands as a word (a tag before the sentence, a blanked word), so it
        is one piece, as it was when fitted on tagged text, not a lone "▁" and the mark."""
        import sentencepiece as spm

        text = [line.lower() if cfg.lowercase else line for line in lines if line.strip()]
        buffer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(text),
                model_writer=buffer,
                model_type=cfg.model_type,
                vocab_size=cfg.vocab_size,
                character_coverage=cfg.character_coverage,
                unk_id=UNK,
                pad_id=PAD,
                bos_id=SOS,
                eos_id=EOS,
                unk_piece=SPECIALS[UNK],
                pad_piece=SPECIALS[PAD],
                bos_piece=SPECIALS[SOS],
                eos_piece=SPECIALS[EOS],
                input_sentence_size=0,
                user_defined_symbols=[f"{WORD_START}{mark}" for mark in reserved],
                minloglevel=2,
                num_threads=threads,
            )
        except RuntimeError as e:
            match = _SPM_TOO_BIG.search(str(e))
            if match:
                raise UsageError(
                    f"tokenizer.vocab_size={match.group(1)} is too large for this "
                    f"training corpus: SentencePiece allows at most {match.group(2)}"
                ) from None
            raise UsageError(f"SentencePiece training failed: {first_line(e)}") from None
        return cls(buffer.getvalue(), cfg.lowercase)

    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]:
        text = [line.lower() if self.lowercase else line for line in lines]
        ids: list[list[int]] = self.sp.encode(text, num_threads=self.threads)
        if progress:
            progress(len(lines))
        return ids

    @classmethod
    def fit(cls, cfg: TokenizerConfig, langs: tuple[str, str], text: TrainingText) -> tuple[Tokenizer, Tokenizer]:
        """SentencePiece on a seeded sample of tokenizer.fit_sample pairs, with every CPU:
        one model for both sides (tokenizer.joint) or one each."""
        sources, targets = text.sample(cfg.fit_sample)
        if cfg.joint:
            shared = cls.train([*sources, *targets], cfg, text.workers, text.reserved)
            return shared, shared
        return cls.train(sources, cfg, text.workers, text.reserved), cls.train(targets, cfg, text.workers)

    def set_threads(self, threads: int) -> None:
        self.threads = threads

    def encode_sampled(self, lines: Sequence[str], alpha: float) -> list[list[int]]:
        """One sampled segmentation per line (subword regularization): BPE-dropout with
        probability `alpha` for BPE models, sampling with smoothing `alpha` over all
        segmentations for unigram models. The draws come from SentencePiece's own generator,
        which cannot be seeded per call (google/sentencepiece#540, #609: its seed is read once
        per thread), so they differ from process to process."""
        text = [line.lower() if self.lowercase else line for line in lines]
        ids: list[list[int]] = self.sp.encode(text, enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=1)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self.sp.decode(strip_specials(ids, self.ids))
        return text

    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "lowercase": self.lowercase, "model": self.model}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SubwordTokenizer:
        return cls(state["model"], state["lowercase"])
