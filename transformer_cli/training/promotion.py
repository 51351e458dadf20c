"""The promotion gate: `best.pt` replaces `published.pt` only when it is better by a margin.

Both models are scored on the current validation data, so a nightly retrain on changed data
compares like with like. Loss per token is only comparable between models with the same
tokenizer. A candidate whose vocabulary grows the published model's (the same pieces at the
same ids, and more: train.retrain.grow_vocabulary) is compared by its summed validation NLL,
each model on its own tokenization of the same text, per target token of the published
model's tokenization: the published model's loss as ever, and the candidate's in the same
units (the comparison across tokenizers that per-character or per-word perplexities make).
When the tokenizers differ otherwise the gate compares greedy validation BLEU instead. A
candidate that continued the published model on more training pairs (the nightly continuation on a grown
corpus, by what their checkpoints record) need not be better: it is promoted unless it is
worse by more than a tolerance, from the best model published on this validation data,
since the published model never saw the new pairs and validation cannot tell apart two
models closer than seeds move them. A model trained from scratch must be better, as ever.
A replay night is judged on the new pairs it held out as well (training/held_out.py).
Every decision is one JSON line in promotions.log; a decision already taken for the same
best.pt is not taken again. `published.pt` is verified on every run: a damaged one is set
aside and replaced. Each replaced model is kept in `published.history/`, from which
`tfm publish --rollback` restores it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import Checkpoint, CheckpointError
from ..config import DecodeConfig
from ..config_train import TrainConfig
from ..data.prepared import Prepared
from ..errors import UsageError
from ..evaluate import loss_result, texts_nll, translate_and_score
from ..fsutil import atomic_write_bytes
from ..host.device import autocast_dtype
from ..inference.translate import TorchTranslator
from ..tokenizers.growth import extends
from ..tokenizers.pair import TokenizerPair, vocabulary_digest
from .held_out import HeldOut, score
from .published import (
    archive,
    decisions,
    history,
    now,
    readable,
    record,
    restore_from_history,
    verified_published,
)
from .retrain_policy import Facts, trained_pairs
from .run_dir import RunDir

log = logging.getLogger("tfm")


class Policy(Enum):
    """When best.pt replaces published.pt (train.promote, `--promote`)."""

    IF_BETTER = "if-better"  # when the gate judges it better (and good enough)
    ALWAYS = "always"  # whenever it differs (a first or repairing promotion is still judged)
    NEVER = "never"  # only to replace a damaged published.pt


class Metric(Enum):
    """What the gate compares (train.promote_metric)."""

    VALID_LOSS = "valid_loss"  # validation NLL per token: only between models of one tokenizer
    VALID_BLEU = "valid_bleu"  # greedy validation BLEU, default decoding

    @property
    def lower_is_better(self) -> bool:
        return self is Metric.VALID_LOSS


class Outcome(Enum):
    """What a promotion did to published.pt."""

    PROMOTED = "promoted"  # best.pt became published.pt
    KEPT = "kept"  # published.pt stays: not better, kept out, or --promote never
    UNCHANGED = "unchanged"  # published.pt already is this best.pt
    ALREADY_DECIDED = "already decided"  # this best.pt was judged before, under the same rules
    NOTHING = "nothing"  # no usable best.pt (and nothing to repair published.pt from)
    RESTORED = "restored"  # a damaged published.pt was restored from published.history/


@dataclass(frozen=True)
class Decision:
    """A promotion's outcome, to branch on, and its text, for train.log and promotions.log."""

    outcome: Outcome
    text: str

    def __str__(self) -> str:
        return self.text


class Scorer:
    """Scores checkpoints on the prepared validation split, and on a night's `held_out` new pairs."""

    def __init__(
        self,
        prepared: Prepared,
        src_lang: str,
        tgt_lang: str,
        device: torch.device,
        precision: str,
        check_stop: Callable[[], None] | None = None,
        held_out: HeldOut | None = None,
    ):
        self.prepared, self.src_lang, self.tgt_lang = prepared, src_lang, tgt_lang
        self.device, self.dtype = device, autocast_dtype(device, precision)
        self.check_stop, self.held_out = check_stop, held_out
        self._nlls: dict[str, tuple[float, int]] = {}  # by checkpoint digest

    def __call__(self, checkpoint: Checkpoint, metric: Metric, per_tokens_of: Checkpoint | None = None) -> float:
        """`metric` of `checkpoint`; a loss per target token of `per_tokens_of`'s tokenization
        of the validation text, when given (else its own)."""
        if metric is Metric.VALID_LOSS:
            nll, tokens = self._nll(checkpoint)
            return loss_result(nll, self._nll(per_tokens_of)[1] if per_tokens_of is not None else tokens).loss
        translator = TorchTranslator.load(checkpoint, self.device, DecodeConfig(), self.dtype)
        result = translate_and_score(
            translator,
            self.prepared.text("val", self.src_lang),
            self.prepared.text("val", self.tgt_lang),
            self.check_stop,
        )
        return result.scores.bleu

    def _nll(self, checkpoint: Checkpoint) -> tuple[float, int]:
        """Summed validation NLL and target tokens, the text encoded with the checkpoint's own
        tokenizers (the prepared split when they are the folder's)."""
        if checkpoint.digest not in self._nlls:
            translator = TorchTranslator.load(checkpoint, self.device, DecodeConfig(), self.dtype)
            if vocabulary_digest(checkpoint.tokenizer) == self.prepared.tokenizers.vocabulary_digest():
                nll = translator.corpus_nll(self.prepared.split("val"), self.check_stop)
            else:
                sources, targets = (self.prepared.text("val", lang) for lang in (self.src_lang, self.tgt_lang))
                nll = texts_nll(translator, sources, targets, self.check_stop)
            self._nlls[checkpoint.digest] = nll
        return self._nlls[checkpoint.digest]

    def scored_on(self, checkpoint: Checkpoint, metric: Metric) -> str:
        """What two scores of `metric` must share to be compared across nights: the
        validation text and, for loss, the vocabulary (a short digest, recorded with them)."""
        h = hashlib.sha256(metric.value.encode())
        for lang in (self.src_lang, self.tgt_lang):
            h.update("\n".join(self.prepared.text("val", lang)).encode())
        if metric is Metric.VALID_LOSS:
            h.update(vocabulary_digest(checkpoint.tokenizer).encode())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class GateRules:
    """How much better a candidate must be, and how good at least (train.promote_* keys)."""

    margin_loss: float = 0.0  # valid_loss must drop by at least this much
    margin_bleu: float = 0.0  # valid_bleu must rise by at least this much
    min_bleu: float | None = None  # greedy valid_bleu a candidate must reach to be published
    keep: int = 3  # replaced models kept in published.history/
    tolerance_loss: float = 0.0  # a continuation on more pairs: valid_loss may be this much higher
    tolerance_bleu: float = 0.0  # a continuation on more pairs: valid_bleu may be this much lower
    tolerance_held_out: float = 0.0  # a night's loss on its held-out new pairs may be this much higher

    @classmethod
    def from_config(cls, train: TrainConfig) -> GateRules:
        return cls(
            margin_loss=train.promote_margin_loss,
            margin_bleu=train.promote_margin_bleu,
            min_bleu=train.promote_min_bleu,
            keep=train.keep_published,
            tolerance_loss=train.promote_tolerance_loss,
            tolerance_bleu=train.promote_tolerance_bleu,
            tolerance_held_out=train.retrain.held_out_tolerance_loss,
        )

    def as_record(self) -> dict[str, Any]:
        """The rules that decide (not how many models are kept), as logged with each decision."""
        return {
            "margin_loss": self.margin_loss,
            "margin_bleu": self.margin_bleu,
            "min_bleu": self.min_bleu,
            "tolerance_loss": self.tolerance_loss,
            "tolerance_bleu": self.tolerance_bleu,
            "tolerance_held_out": self.tolerance_held_out,
        }

    def margin(self, metric: Metric) -> float:
        return self.margin_loss if metric.lower_is_better else self.margin_bleu

    def tolerance(self, metric: Metric) -> float:
        return self.tolerance_loss if metric.lower_is_better else self.tolerance_bleu

    def better(self, metric: Metric, new: float, old: float, grown: bool = False) -> bool:
        """Whether `new` replaces `old`: better by the margin, or, for a candidate trained on
        a grown corpus (`grown`), worse by no more than the tolerance."""
        gain = old - new if metric.lower_is_better else new - old
        return gain >= (-self.tolerance(metric) if grown else self.margin(metric))


def _best_published(past: list[dict[str, Any]], metric: Metric, scored_on: str, current: float) -> float:
    """The best score of `metric` a published model had: `current` (published.pt's now), or a
    better one recorded in `past` decisions on the same validation data (and vocabulary, for
    loss)."""
    scores: list[Any] = [current]
    for entry in past:
        if entry.get("metric") != metric.value or entry.get("scored_on") != scored_on:
            continue
        scores.append(entry.get("published"))
        if str(entry.get("decision", "")).startswith("promoted"):
            scores.append(entry.get("candidate"))
    known = [float(x) for x in scores if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return min(known) if metric.lower_is_better else max(known)


def published_or_restored(run: RunDir) -> Checkpoint | None:
    """published.pt, verified, for a run that continues it (None: none is published yet). A
    damaged one is repaired as the gate repairs it, from published.history/; with nothing to
    restore it from, a UsageError says so and nothing is moved."""
    if not run.published.is_file():
        return None
    try:
        return Checkpoint.read(run.published)
    except (CheckpointError, UsageError) as e:
        if not any(readable(p) for p in history(run)):
            raise UsageError(
                f"{e}, and {run.published_history} holds no earlier model to restore: "
                "put a good published.pt back (or train without train.init_from)"
            ) from None
    verified_published(run)  # moves it aside
    log.warning("%s", _repair_without_best(run).text)
    return Checkpoint.read(run.published)


def promote(
    run: RunDir,
    policy: Policy,
    metric: Metric,
    scorer: Scorer,
    rules: GateRules = GateRules(),
    retrain: dict[str, Any] | None = None,
    best: Path | None = None,
) -> Decision:
    """Apply the gate; returns the decision. `retrain`: train.retrain's decision that started
    the run (training/retrain_policy.py), recorded with it. `best`: the candidate, when not the
    run's best.pt (that of the run from scratch behind the nights: training/scratch.py)."""
    best = best or run.best
    published, was_damaged = verified_published(run)
    if not best.is_file():
        return _repair_without_best(run) if was_damaged else Decision(Outcome.NOTHING, "no best.pt to promote")
    try:
        candidate = Checkpoint.read(best)
    except CheckpointError as e:  # keep serving what is published; a retrain makes a new best
        log.warning("%s: nothing promoted (published.pt is unchanged)", e)
        if was_damaged:
            return _repair_without_best(run)
        return Decision(Outcome.NOTHING, "nothing promoted: best.pt is damaged")
    past = decisions(run)
    last = past[-1] if past else None
    rules_used = rules.as_record()
    if (
        published is not None
        and last
        and last.get("candidate_sha256") == candidate.sha256
        and last.get("policy") == policy.value
        and last.get("rules", rules_used) == rules_used
    ):
        return Decision(Outcome.ALREADY_DECIDED, f"already decided for this best.pt: {last['decision']}")
    entry: dict[str, Any] = {
        "time": now(),
        "policy": policy.value,
        "rules": rules_used,
        "candidate_sha256": candidate.sha256,
        "published_sha256": published.sha256 if published else None,
    }
    if retrain is not None:
        entry["retrain"] = retrain
    decision = _decide(candidate, published, policy, metric, scorer, rules, entry, was_damaged, past)
    if decision.outcome is Outcome.PROMOTED:
        if published is not None:
            archive(run, published, rules.keep)
        atomic_write_bytes(run.published, best.read_bytes())
    entry["decision"] = decision.text
    record(run, entry)
    return decision


def _decide(
    candidate: Checkpoint,
    published: Checkpoint | None,
    policy: Policy,
    metric: Metric,
    scorer: Scorer,
    rules: GateRules,
    entry: dict[str, Any],
    was_damaged: bool,
    past: list[dict[str, Any]],
) -> Decision:
    """The decision for a readable best.pt not decided before: by identity, policy, or judged
    (`past`: promotions.log's entries so far)."""
    if published is not None and published.sha256 == candidate.sha256:
        return Decision(Outcome.UNCHANGED, "unchanged (published is this best.pt)")
    if policy is Policy.NEVER and not was_damaged:
        return Decision(Outcome.KEPT, "kept published (--promote never)")
    if policy is Policy.ALWAYS and published is not None:
        return Decision(Outcome.PROMOTED, "promoted (--promote always)")
    return _judge(candidate, published, metric, scorer, rules, entry, was_damaged, past)


def _grows(candidate: Checkpoint, published: Checkpoint) -> bool:
    """Whether the candidate's vocabularies are the published model's with pieces appended."""
    try:
        new, old = TokenizerPair.from_state(candidate.tokenizer), TokenizerPair.from_state(published.tokenizer)
    except ValueError:
        return False
    return extends(new.src, old.src) and extends(new.tgt, old.tgt)


def _continues(candidate: Checkpoint, published: Checkpoint) -> bool:
    """Whether the candidate's run started from the published model (train.init_from)."""
    return isinstance(candidate.parent, dict) and candidate.parent.get("sha256") == published.sha256


def _growth(candidate: Checkpoint, published: Checkpoint) -> float | None:
    """For a candidate that continued the published model (train.init_from): how many more
    training pairs it learned from, as a share of the published model's, by what their
    checkpoints record (None: not a continuation of it, or the pairs are not recorded)."""
    if not _continues(candidate, published):
        return None
    new = trained_pairs(candidate)
    return None if new is None else Facts(new, trained_pairs(published)).growth


def _judge(
    candidate: Checkpoint,
    published: Checkpoint | None,
    metric: Metric,
    scorer: Scorer,
    rules: GateRules,
    entry: dict[str, Any],
    was_damaged: bool,
    past: list[dict[str, Any]],
) -> Decision:
    """The if-better decision (also for a first or a repairing promotion: the minimum quality) on
    validation, then on the scorer's held-out new pairs, for a continuation of the published model."""
    if rules.min_bleu is not None:
        bleu = scorer(candidate, Metric.VALID_BLEU)
        entry["candidate_bleu"] = round(bleu, 2)
        if bleu < rules.min_bleu:
            return Decision(
                Outcome.KEPT,
                f"kept out: greedy validation BLEU {bleu:.2f} is below train.promote_min_bleu={rules.min_bleu}",
            )
    if published is None:
        return Decision(
            Outcome.PROMOTED, "promoted (published.pt was damaged)" if was_damaged else "promoted (none published yet)"
        )
    decision = _on_validation(candidate, published, metric, scorer, rules, entry, past)
    if scorer.held_out is None or not len(scorer.held_out) or not _continues(candidate, published):
        return decision
    scores = score(scorer.held_out, candidate, published, scorer.device, scorer.dtype, scorer.check_stop)
    entry["held_out"] = scores.record()
    if decision.outcome is Outcome.PROMOTED and not scores.within(rules.tolerance_held_out):
        return Decision(Outcome.KEPT, scores.refusal(rules.tolerance_held_out))
    return Decision(decision.outcome, f"{decision.text}; {scores.describe()}")


def _on_validation(
    candidate: Checkpoint,
    published: Checkpoint,
    metric: Metric,
    scorer: Scorer,
    rules: GateRules,
    entry: dict[str, Any],
    past: list[dict[str, Any]],
) -> Decision:
    """The if-better decision on validation. A candidate that continued the published model on
    more pairs (the nightly continuation on a grown corpus) and is not better by the margin is
    judged by the tolerance, from the best score any published model had on this validation
    data, so that nightly ties cannot walk the quality down a tolerance at a time."""
    # The vocabularies decide (a truecaser learned from more data changes no id).
    same_tokenizer = vocabulary_digest(candidate.tokenizer) == vocabulary_digest(published.tokenizer)
    grown = not same_tokenizer and _grows(candidate, published)
    used = metric if (metric is not Metric.VALID_LOSS or same_tokenizer or grown) else Metric.VALID_BLEU
    if used is not metric:
        log.info("the published model has another tokenizer: comparing valid_bleu, not valid_loss")
    elif grown and used is Metric.VALID_LOSS:
        log.info("the candidate's vocabulary grows the published model's: comparing valid_loss per published token")
    new, old = scorer(candidate, used, published if grown else None), scorer(published, used)
    scored_on = scorer.scored_on(published if grown else candidate, used)
    entry.update(metric=used.value, candidate=round(new, 5), published=round(old, 5), scored_on=scored_on)
    growth = _growth(candidate, published)
    if growth is not None and growth > 0 and not rules.better(used, new, old):
        best = _best_published(past, used, scored_on, old)
        entry["best_published"] = round(best, 5)
        tolerance, grew = rules.tolerance(used), f"it learned from {growth:.1%} more pairs"
        if rules.better(used, new, best, grown=True):
            return Decision(Outcome.PROMOTED, f"promoted ({grew}; within {tolerance} of the best published)")
        figures = f"{used.value} {entry['candidate']:.4g} against the best published {entry['best_published']:.4g}"
        return Decision(
            Outcome.KEPT, f"kept published (it forgets: {figures}, worse by more than {tolerance}, though {grew})"
        )
    margin = rules.margin(used)
    if rules.better(used, new, old):
        return Decision(
            Outcome.PROMOTED, f"promoted (better by at least {margin})" if margin else "promoted (at least as good)"
        )
    return Decision(
        Outcome.KEPT, f"kept published (not better by {margin} or more)" if margin else "kept published (it is better)"
    )


def _repair_without_best(run: RunDir) -> Decision:
    """A damaged published.pt and no usable best.pt: the newest archived model comes back."""
    restored = restore_from_history(run)
    if restored is None:
        log.warning("published.pt was damaged and there is no model to restore it from")
        return Decision(Outcome.NOTHING, "published.pt was damaged; nothing to restore it from")
    record(run, {"time": now(), "decision": f"restored published.pt from {restored}"})
    return Decision(Outcome.RESTORED, f"restored published.pt from published.history/{restored}")


def rollback(run: RunDir, policy: Policy) -> str:
    """`tfm publish --rollback`: the newest archived model becomes published.pt again. The
    current best.pt is recorded as decided, so the next run does not promote it again."""
    current, _ = verified_published(run)
    restored = restore_from_history(run)
    if restored is None:
        raise UsageError(f"nothing to roll back to: {run.published_history} holds no earlier published model")
    decision = f"rolled back to {restored}"
    entry: dict[str, Any] = {
        "time": now(),
        "policy": policy.value,
        "published_sha256": current.sha256 if current else None,
        "decision": decision,
    }
    try:
        entry["candidate_sha256"] = Checkpoint.read(run.best).sha256
    except (CheckpointError, UsageError):
        pass
    record(run, entry)
    return decision
