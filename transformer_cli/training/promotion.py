"""The promotion gate: `best.pt` replaces `published.pt` only when it is at least as good.

Both models are scored on the current validation data, so a nightly retrain on changed data
compares like with like. Loss is only comparable between models with the same tokenizer;
when the tokenizers differ the gate compares greedy validation BLEU instead. Every decision
is one JSON line in promotions.log; a decision already taken for the same best.pt is not
taken again.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import torch

from ..checkpoint import CheckpointError, content_digest, load_checkpoint
from ..config import DecodeConfig
from ..data.preprocess import Prepared
from ..device import autocast_dtype
from ..evaluate import corpus_nll, loss_result, translate_and_score
from ..fsutil import atomic_write_bytes, atomic_write_text
from ..inference.translate import Translator, model_from_payload
from .run_dir import RunDir

log = logging.getLogger("tfm")
LOWER_IS_BETTER = {"valid_loss": True, "valid_bleu": False}


class Scorer:
    """Scores a checkpoint payload on the validation split of the prepared data."""

    def __init__(self, prepared: Prepared, src_lang: str, tgt_lang: str, device: torch.device,
                 precision: str):
        self.prepared, self.src_lang, self.tgt_lang = prepared, src_lang, tgt_lang
        self.device, self.dtype = device, autocast_dtype(device, precision)

    def __call__(self, payload: dict[str, Any], metric: str) -> float:
        model, tokenizers = model_from_payload(payload)
        model.to(self.device)
        if metric == "valid_loss":
            nll, tokens = corpus_nll(model, self.prepared.split("val"), self.device, self.dtype,
                                     max_len=model.config.max_len)
            return loss_result(nll, tokens).loss
        translator = Translator(model, tokenizers, self.device, DecodeConfig(), self.dtype)
        result = translate_and_score(translator, self.prepared.text("val", self.src_lang),
                                     self.prepared.text("val", self.tgt_lang))
        return result.scores.bleu


def _last_decision(run: RunDir) -> dict[str, Any] | None:
    if not run.promotions.is_file():
        return None
    lines = [line for line in run.promotions.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def _record(run: RunDir, entry: dict[str, Any]) -> None:
    old = run.promotions.read_text() if run.promotions.is_file() else ""
    atomic_write_text(run.promotions, old + json.dumps(entry) + "\n")


def promote(run: RunDir, policy: str, metric: str, scorer: Scorer) -> str:
    """Apply the gate (`policy`: if-better, always, never); returns the decision."""
    if not run.best.is_file():
        return "no best.pt to promote"
    try:
        candidate = load_checkpoint(run.best)
    except CheckpointError as e:  # keep serving what is published; a retrain makes a new best
        log.warning("%s: nothing promoted (published.pt is unchanged)", e)
        return "nothing promoted: best.pt is damaged"
    last = _last_decision(run)
    if last and last.get("candidate_sha256") == candidate["sha256"] and last.get("policy") == policy:
        return f"already decided for this best.pt: {last['decision']}"
    published = None
    if run.published.is_file():
        try:
            published = load_checkpoint(run.published)
        except CheckpointError as e:
            log.warning("%s: it will be replaced", e)
    entry: dict[str, Any] = {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                             "policy": policy, "candidate_sha256": candidate["sha256"],
                             "published_sha256": published["sha256"] if published else None}
    if published is not None and published["sha256"] == candidate["sha256"]:
        decision = "unchanged (published is this best.pt)"
    elif policy == "never":
        decision = "kept published (--promote never)"
    elif published is None or policy == "always":
        decision = "promoted" + (" (--promote always)" if published is not None else " (none published yet)")
    else:
        same_tokenizer = (content_digest({"t": candidate["tokenizer"]})
                          == content_digest({"t": published["tokenizer"]}))
        used = metric if (metric != "valid_loss" or same_tokenizer) else "valid_bleu"
        if used != metric:
            log.info("the published model has another tokenizer: comparing valid_bleu, not valid_loss")
        new, old = scorer(candidate, used), scorer(published, used)
        better = new <= old if LOWER_IS_BETTER[used] else new >= old
        entry.update(metric=used, candidate=round(new, 5), published=round(old, 5))
        decision = "promoted (at least as good)" if better else "kept published (it is better)"
    if decision.startswith("promoted"):
        atomic_write_bytes(run.published, run.best.read_bytes())
    entry["decision"] = decision
    _record(run, entry)
    return decision
