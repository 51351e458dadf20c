"""A validation's figures, typed: one `ValidationRecord` per validation, written as a line of
`metrics.jsonl`, kept in the run's progress (last.pt) and, as plain data, in the metrics of
every checkpoint it describes.

The losses are the negative log-likelihood per target token (perplexities follow from them),
not the objective the optimizer minimises: see docs/architecture.md, "Exceptions kept".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ..records import from_json, to_json


@dataclass(frozen=True, kw_only=True)
class ValidationRecord:
    epoch: int  # the epoch it ends, or the one under way (mid-epoch validations)
    end_of_epoch: bool
    step: int  # optimizer steps done
    train_loss: float  # this epoch's so far
    train_ppl: float
    valid_loss: float
    valid_ppl: float
    lr: float
    tokens_per_s: float  # target tokens, all ranks together
    elapsed_s: float  # wall time over every session of the run
    valid_word_ppl: float | None = None  # per word (+1 per sentence end) of the references
    valid_bleu: float | None = None  # train.valid_bleu
    valid_chrf: float | None = None
    valid_decode: str | None = None  # how validation decoded: "greedy", "beam 5"
    averaged_snapshots: int | None = None  # best.pt's weights are an average of this many

    @classmethod
    def read(cls, raw: object) -> ValidationRecord | None:
        """A record from plain data (a checkpoint's metrics, a metrics.jsonl line); None when
        it holds none (a model imported from elsewhere, or a file of another tfm)."""
        try:
            return from_json(cls, raw, "metrics")
        except ValueError:
            return None

    def to_json(self) -> dict[str, Any]:
        """Plain data: what checkpoints store and metrics.jsonl holds (None fields left out)."""
        return to_json(self)

    def line(self, improved: bool) -> str:
        """The log line, in the notebook's format (`*` marks a new best)."""
        minutes, seconds = divmod(int(self.elapsed_s), 60)
        head = f"Epoch: {self.epoch:02}" if self.end_of_epoch else f"Step: {self.step}"
        bleu = (
            f" | Val. BLEU ({self.valid_decode or 'greedy'}): {self.valid_bleu:.2f}"
            if self.valid_bleu is not None
            else ""
        )
        return (
            f"{head} | Time: {minutes}m {seconds:02d}s | Train Loss: {self.train_loss:.3f} | "
            f"Train PPL: {self.train_ppl:7.3f} | Val. Loss: {self.valid_loss:.3f} | "
            f"Val. PPL: {self.valid_ppl:7.3f}{bleu} | {self.tokens_per_s:.0f} tok/s"
            f"{' *' if improved else ''}"
        )


def described(metrics: dict[str, Any]) -> str:
    """A checkpoint's metrics in a few words: "epoch 15, step 3420, valid_loss 1.62, ...".
    Parsed leniently: any of the keys a checkpoint may hold."""
    shown = [f"{k} {metrics[k]}" for k in ("epoch", "step", "valid_loss", "valid_bleu") if k in metrics]
    return ", ".join(shown) or "no metrics"


def write_jsonl(records: list[ValidationRecord]) -> str:
    """metrics.jsonl's text."""
    return "".join(json.dumps(r.to_json(), allow_nan=False) + "\n" for r in records)


def read_jsonl(text: str) -> list[ValidationRecord]:
    """The records of a metrics.jsonl; lines that hold none are skipped."""
    records = (ValidationRecord.read(json.loads(line)) for line in text.splitlines() if line.strip())
    return [r for r in records if r is not None]


def word_perplexity(valid_loss: float, valid_tokens: int, valid_words: int) -> float:
    """Perplexity per reference word (+1 per sentence end), from the per-token loss."""
    return math.exp(min(50.0, valid_loss * valid_tokens / valid_words))
