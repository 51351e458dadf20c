"""Scoring a model: teacher-forced loss/perplexity, and sacreBLEU/chrF of its translations.

BLEU and chrF always come from sacreBLEU on detokenized output against the raw references,
with sacreBLEU's signature so the numbers can be compared with published ones. A model
trained on lowercased text is scored case-insensitively; the signature then says `case:lc`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .config import DecodeConfig
from .data.shards import EncodedSplit
from .inference.strategies import strategy_for
from .inference.translate import TranslationBackend


@dataclass
class LossResult:
    loss: float  # mean negative log-likelihood per target token (incl. <eos>)
    ppl: float
    n_tokens: int


def loss_result(nll: torch.Tensor | float, tokens: torch.Tensor | int) -> LossResult:
    n = int(tokens)
    loss = float(nll) / max(1, n)
    return LossResult(loss, math.exp(min(loss, 50.0)), n)


@dataclass
class BleuResult:
    bleu: float
    chrf: float
    signature: str  # sacreBLEU's BLEU signature
    chrf_signature: str


def score_translations(hypotheses: list[str], references: list[str], lowercase: bool = False) -> BleuResult:
    """Corpus BLEU (13a tokenization) and chrF with sacreBLEU."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(lowercase=lowercase), CHRF(lowercase=lowercase)
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return BleuResult(round(b.score, 2), round(c.score, 2), str(bleu.get_signature()), str(chrf.get_signature()))


@dataclass
class DecodeResult:
    hypotheses: list[str]
    scores: BleuResult
    seconds: float

    @property
    def sentences_per_s(self) -> float:
        return len(self.hypotheses) / max(self.seconds, 1e-9)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self.scores),
            "n_sentences": len(self.hypotheses),
            "sentences_per_s": round(self.sentences_per_s, 2),
        }


def translate_and_score(
    translator: TranslationBackend,
    sources: list[str],
    references: list[str],
    check_stop: Callable[[], None] | None = None,
    decode: DecodeConfig | None = None,
) -> DecodeResult:
    """Translate `sources` (best hypothesis each, with `decode` or the translator's settings)
    and score against `references`. `check_stop` is called between batches."""
    started = time.perf_counter()
    hypotheses = [n_best[0].text for n_best in translator.translate(sources, decode, check_stop).translations]
    seconds = time.perf_counter() - started
    lowercase = translator.tokenizers.tgt.lowercase
    return DecodeResult(hypotheses, score_translations(hypotheses, references, lowercase), seconds)


@dataclass
class EvaluationReport:
    checkpoint: str
    split: str
    n_sentences: int
    loss: float
    ppl: float
    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    beam_size: int
    sentences_per_s: float
    hypotheses: str  # path of the written hypotheses
    decoding: str  # how it decoded: "greedy", "beam 5", ... (inference/strategies.py)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def as_table(self) -> str:
        rows = [
            ("checkpoint", self.checkpoint),
            ("split", f"{self.split} ({self.n_sentences} sentences)"),
            ("loss / PPL", f"{self.loss:.3f} / {self.ppl:.3f}"),
            ("BLEU", f"{self.bleu:.2f}  {self.signature}"),
            ("chrF", f"{self.chrf:.2f}  {self.chrf_signature}"),
            ("decoding", f"{self.decoding}, {self.sentences_per_s:.1f} sentences/s"),
            ("hypotheses", self.hypotheses),
        ]
        return "\n".join(f"{k:<11} {v}" for k, v in rows)


def texts_nll(
    translator: TranslationBackend,
    sources: list[str],
    references: list[str],
    check_stop: Callable[[], None] | None = None,
) -> tuple[float, int]:
    """Summed teacher-forced NLL of the references and the target tokens scored, the texts
    encoded with the translator's own tokenizers."""
    tok = translator.tokenizers
    split = EncodedSplit.from_lists(tok.src.encode_batch(sources), tok.tgt.encode_batch(references))
    return translator.corpus_nll(split, check_stop)


def evaluate_texts(
    translator: TranslationBackend,
    sources: list[str],
    references: list[str],
    label: str,
    checkpoint: str,
    hypotheses_path: Path,
) -> EvaluationReport:
    """Loss/PPL (teacher-forced) and BLEU/chrF (decoded) of a model on aligned texts.

    Texts are encoded with the checkpoint's own tokenizer, so any checkpoint can be scored on
    any data. Hypotheses are written (atomically) to `hypotheses_path`, one per line.
    """
    from .fsutil import atomic_write_text

    losses = loss_result(*texts_nll(translator, sources, references))
    decoded = translate_and_score(translator, sources, references)
    atomic_write_text(hypotheses_path, "".join(f"{h}\n" for h in decoded.hypotheses))
    s = decoded.scores
    return EvaluationReport(
        checkpoint,
        label,
        len(sources),
        round(losses.loss, 5),
        round(losses.ppl, 4),
        s.bleu,
        s.chrf,
        s.signature,
        s.chrf_signature,
        translator.decode.beam_size,
        round(decoded.sentences_per_s, 2),
        str(hypotheses_path),
        strategy_for(translator.decode).describe(translator.decode),
    )
