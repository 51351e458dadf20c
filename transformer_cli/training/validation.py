"""What a validation reports: its record (training/metrics.py), validation BLEU, TensorBoard."""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..config import Config, DecodeConfig
from ..contracts.model import TranslationModel
from ..data.prepared import Prepared
from ..errors import TfmError
from ..evaluate import LossResult, score_translations
from ..inference.strategies import strategy_for
from ..inference.translate import TorchTranslator
from .cadence import Cadence
from .distributed import DistContext
from .metrics import ValidationRecord, word_perplexity
from .progress import Progress

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

log = logging.getLogger("tfm")


def check_finite(train: LossResult, valid: LossResult, step: int, lr: float) -> None:
    """A non-finite loss ends the run with an error: nothing is saved or promoted from it."""
    if math.isfinite(train.loss) and math.isfinite(valid.loss):
        return
    raise TfmError(
        f"training diverged: train loss {train.loss}, validation loss {valid.loss} at "
        f"step {step} (train.lr={lr}); nothing was saved or promoted from it: lower "
        "train.lr (or set train.clip_norm) and run again"
    )


def validation_record(
    p: Progress, end_of_epoch: bool, train: LossResult, valid: LossResult, valid_words: int, lr: float
) -> ValidationRecord:
    """The record of a validation. `train.n_tokens`: the epoch's target tokens over all ranks;
    `valid_words`: words (+1 per sentence end) of the validation references, for word PPL."""
    return ValidationRecord(
        epoch=p.epoch if end_of_epoch else p.epoch + 1,
        end_of_epoch=end_of_epoch,
        step=p.step,
        train_loss=round(train.loss, 5),
        train_ppl=round(train.ppl, 4),
        valid_loss=round(valid.loss, 5),
        valid_ppl=round(valid.ppl, 4),
        valid_word_ppl=round(word_perplexity(valid.loss, valid.n_tokens, valid_words), 4),
        lr=lr,
        tokens_per_s=round(train.n_tokens / max(p.epoch_train_s, 1e-9), 1),  # all ranks
        elapsed_s=round(p.elapsed_s, 2),
    )


def valid_decode_settings(cfg: Config) -> DecodeConfig:
    """train.valid_decode's search: greedy, beam search with the decode section's beam size, or
    another strategy with the decode section's settings; one translation a sentence."""
    strategy = cfg.train.valid_decode
    beam = 1 if strategy == "greedy" else cfg.decode.beam_size
    return dataclasses.replace(cfg.decode, strategy=strategy, beam_size=beam, n_best=1)


def decode_label(settings: DecodeConfig) -> str:
    """How validation decodes, as records and logs name it: "greedy" or "beam N"."""
    return strategy_for(settings).describe(settings)


def validation_bleu(
    model: TranslationModel[Any],
    prepared: Prepared,
    cfg: Config,
    device: torch.device,
    dtype: torch.dtype | None,
    cadence: Cadence,
    dist: DistContext,
) -> dict[str, Any]:
    """Validation BLEU/chrF decoded with train.valid_decode, as record fields (the
    translator keeps the model's train/eval mode).

    Every rank takes part: rank r decodes sentences r, r + world_size, ...; the hypotheses are
    gathered and put back in order, so the score is the one-process figure and no rank waits
    in a collective while another decodes the whole set."""
    settings = valid_decode_settings(cfg)
    translator = TorchTranslator(model, prepared.tokenizers, device, settings, dtype)
    sources = prepared.text("val", cfg.data.src_lang)
    references = prepared.text("val", cfg.data.tgt_lang)
    if dist.is_main:
        log.info(
            "validation BLEU: translating %d sentences (%s%s)",
            len(sources),
            decode_label(settings),
            f", {dist.world_size} ranks" if dist.enabled else "",
        )
    shard = sources[dist.rank :: dist.world_size]
    check = cadence.between_batches(math.ceil(sum(1 for s in shard if s.strip()) / settings.batch_size))
    mine = translator.translate(shard, check_stop=check).translations
    check.finish()
    hypotheses = [""] * len(sources)
    for rank, shard in enumerate(dist.all_gather_object([n_best[0].text for n_best in mine])):
        hypotheses[rank :: dist.world_size] = shard
    scores = score_translations(hypotheses, references, prepared.tokenizers.tgt.lowercase)
    return {"valid_bleu": scores.bleu, "valid_chrf": scores.chrf, "valid_decode": decode_label(settings)}


class TensorBoard:
    """Validation records as TensorBoard scalars in `<folder>` (train.tensorboard); the writer
    is created on the first record."""

    KEYS = ("train_loss", "train_ppl", "valid_loss", "valid_ppl", "lr", "tokens_per_s", "valid_bleu")

    def __init__(self, folder: Path):
        self.folder = folder
        self._writer: SummaryWriter | None = None

    def add(self, r: ValidationRecord) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.folder))
        for key in self.KEYS:
            value = getattr(r, key)
            if value is not None:
                self._writer.add_scalar(key, value, r.step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
