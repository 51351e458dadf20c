"""train.retrain: whether the nightly run continues the published model, and for how many
epochs, or retrains from scratch; decided once, when a run starts, and kept for its resumes.

What the defaults rest on (docs/results.md, "The growth curve": base.yaml on Multi30k, a
parent trained from scratch on the first N pairs, continued on all 29,000 with
train.continued's recipe, against base.yaml from scratch on the 29,000: val 42.42, test2016
42.09, beam 5; CPU time from one-thread runs):

    corpus growth                      continued              val     test2016  CPU time
    +3.5% (28,019 -> 29,000 pairs)     4 epochs               +0.01   -0.22     0.29x (see below)
    +7.4% (27,000 -> 29,000 pairs)     4 epochs               -0.27   +0.04     0.26x (AMD EPYC, issue 30)
    +10%  (26,364 -> 29,000 pairs)     4 epochs               -0.03   -0.44     0.28x
    +10%, seed 2                       4 epochs               -0.56   -0.67     0.32x
    +10%, both seeds, 12 averaged      4 epochs               -0.21   -0.10     0.28x (vs 5 scratch runs)
    +3.5%, 12 averaged                 4 epochs               +0.01   -0.03     0.30x (vs 5 scratch runs)
    +20%  (24,167 -> 29,000 pairs)     8 epochs               -0.60   -0.27     0.56x
    +45%  (20,000 -> 29,000 pairs)     4 epochs               -1.04   -2.08     0.27x (AMD EPYC, issue 30)

Up to +7.4%, 4 epochs come within 0.3 of scratch at under a third of its cost (at +3.5% the
continued model's validation loss is 0.007 above the parent's, within the gate's tolerance for
a continuation: training/promotion.py); at +10% the two seeds, averaging all 12 snapshots of
the night (train.continued.average_last; the last 8 before: 0.39 below), are within 0.21 of
the five scratch runs on record; at +20% twice the epochs still do not, and retraining costs
less than training longer would take. `decide` (pure):

- from scratch (the config's train.*, model.* and tokenizers fitted on the corpus) when the
  growth, (pairs now - pairs the parent was trained on) / pairs the parent was trained on,
  passes max_growth (0.15: between the +10% that continues well and the +20% that does not);
  or when the parent is max_continued_runs (14) continued runs from its last training from
  scratch; or when the parent's tokenizers turn more than max_unk_rate (1%) of either side's
  training tokens into <unk> (preprocessing measures it: the data manifest's
  splits.train.unk_rate);
- else continued for E x growth / reference_growth epochs, rounded up, within
  [min_epochs (default E), max_epochs (8)], E = train.continued.epochs (else train.epochs):
  E up to the measured +10% (reference_growth 0.10), 5 or 6 between +10% and +15% (not
  measured), never fewer by default (fewer epochs for a smaller growth are not measured).
  max_epochs caps a larger max_growth: 8 epochs cost 0.56x a run from scratch.

A figure the parent does not record (a model of a tfm before this) forces nothing: an unknown
growth continues for E epochs. Every checkpoint now records `training` (`training_record`):
its training pairs and its continued runs since a run from scratch.

Under train.retrain.scratch: background (the default) a decision for scratch does not hold the
night up: the night continues as if no rule had chosen scratch (`defer`), its line says that a
retrain from scratch is due, why, and where that run stands, and the model from scratch trains
behind the nights in a run folder of its own (training/scratch.py); foreground: the night
itself retrains from scratch.

The decision is one line in train.log and goes into the night's promotions.log line (and the
run's manifest.json) as `retrain`. It is stored in the run folder's retrain.json with the run
identity it was taken for: a session of the same run (a resume after a kill, or the no-op of a
finished run) takes it from there instead of deciding again, so a run that retrains from
scratch resumes from scratch. policy: fixed decides nothing (train.continued, as before).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..checkpoint import Checkpoint
from ..config_retrain import RetrainConfig
from ..data.manifest import DataManifest
from ..fsutil import atomic_write_text
from .run_dir import RunDir

log = logging.getLogger("tfm")

NOTHING_PUBLISHED = "nothing is published yet"


@dataclass(frozen=True)
class Facts:
    """What a decision is taken on (None: not known)."""

    pairs: int  # training pairs now
    parent_pairs: int | None = None  # training pairs the parent was trained on
    unk_rate: float | None = None  # <unk> share of the training tokens under the parent's tokenizers, larger side
    continued_runs: int | None = None  # the parent's continued runs since its last run from scratch
    parent_seen: bool = False  # whether the parent's seen set is at hand (training/replay.py)

    @property
    def growth(self) -> float | None:
        if self.parent_pairs is None or self.parent_pairs <= 0:
            return None
        return (self.pairs - self.parent_pairs) / self.parent_pairs


@dataclass(frozen=True)
class Decision:
    """Continue for `epochs`, or retrain from scratch (for train.epochs); `why`: the rules that
    chose scratch, or how the epochs were chosen."""

    scratch: bool
    epochs: int
    why: str
    facts: Facts
    replay: bool = False  # a replay night: `epochs` passes over the new pairs (training/replay.py)
    scratch_due: str | None = None  # a night that continues while a retrain from scratch is due: why it is
    scratch_status: str = ""  # and where that run, behind the nights, stands (training/scratch_run.py)

    @property
    def outcome(self) -> str:
        if self.scratch:
            return f"retraining from scratch ({self.why}; {_epochs(self.epochs)})"
        if self.replay:
            night = f"continuing {self.epochs} pass{'' if self.epochs == 1 else 'es'} over the new pairs ({self.why})"
        else:
            night = f"continuing {_epochs(self.epochs)} ({self.why})"
        if self.scratch_due is None:
            return night
        return f"{night}; a retrain from scratch is due ({self.scratch_due}): {self.scratch_status}"

    @property
    def text(self) -> str:
        """Its line in train.log."""
        return f"continued training: {describe(self.facts)}: {self.outcome}"

    def record(self) -> dict[str, Any]:
        """As promotions.log, manifest.json, retrain.json and checkpoints record it."""
        f, growth = self.facts, self.facts.growth
        return {
            "decision": "scratch" if self.scratch else "continue",
            "epochs": self.epochs,
            "why": self.why,
            "train_pairs": f.pairs,
            "parent_train_pairs": f.parent_pairs,
            "growth": None if growth is None else round(growth, 4),
            "unk_rate": None if f.unk_rate is None else round(f.unk_rate, 5),
            "parent_continued_runs": f.continued_runs,
            "parent_seen": f.parent_seen,
            "replay": self.replay,
            **self._scratch_due(),
            "text": self.text,
        }

    def _scratch_due(self) -> dict[str, str]:
        """The record's keys of a retrain from scratch behind the nights (none when not due)."""
        if self.scratch_due is None:
            return {}
        return {"scratch_due": self.scratch_due, "scratch_status": self.scratch_status}

    @classmethod
    def from_record(cls, raw: Any) -> Decision | None:
        """A recorded decision back (None: not one)."""
        try:
            pairs, epochs = _int(raw["train_pairs"]), _int(raw["epochs"])
            if pairs is None or epochs is None:
                return None
            facts = Facts(
                pairs,
                _int(raw.get("parent_train_pairs")),
                None if raw.get("unk_rate") is None else float(raw["unk_rate"]),
                _int(raw.get("parent_continued_runs")),
                raw.get("parent_seen") is True,
            )
            if raw["decision"] not in ("scratch", "continue") or not isinstance(raw["why"], str):
                return None
            due, status = raw.get("scratch_due"), raw.get("scratch_status", "")
            if not isinstance(due, (str, type(None))) or not isinstance(status, str):
                return None
            return cls(raw["decision"] == "scratch", epochs, raw["why"], facts, raw.get("replay") is True, due, status)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an integer: {value!r}")
    return value


def _epochs(n: int) -> str:
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def _pct(share: float) -> str:
    """7.4%, 45%, 0.25%."""
    value = 100 * share
    text = f"{value:.2f}" if abs(value) < 1 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") + "%"


def describe(facts: Facts) -> str:
    """The figures of a decision, for its log line."""
    growth = facts.growth
    if growth is None:
        parts = [
            f"{facts.pairs:,} pairs (the published model does not record how many it was trained on: "
            "scratch not forced by growth)"
        ]
    else:
        verb = "grew" if growth >= 0 else "shrank"
        parts = [f"corpus {verb} {_pct(abs(growth))} ({facts.parent_pairs:,} -> {facts.pairs:,} pairs)"]
    if facts.unk_rate is not None:
        parts.append(f"<unk> {_pct(facts.unk_rate)}")
    if facts.continued_runs is not None:
        runs = facts.continued_runs
        parts.append(f"{runs} continued run{'' if runs == 1 else 's'} since the last from scratch")
    return ", ".join(parts)


def continued_epochs(rules: RetrainConfig, growth: float | None, base: int) -> int:
    """ceil(base x growth / reference_growth) within [min_epochs (default base), max_epochs];
    `base` itself when the growth is unknown."""
    if growth is None:
        return base
    scaled = math.ceil(round(base * max(growth, 0.0) / rules.reference_growth, 6))
    low = base if rules.min_epochs is None else rules.min_epochs
    return max(1, min(rules.max_epochs, max(low, scaled)))


def decide(rules: RetrainConfig, facts: Facts, base_epochs: int, scratch_epochs: int) -> Decision:
    """train.retrain's decision on `facts` (see the module's docstring): `base_epochs` is
    train.continued.epochs (else train.epochs), `scratch_epochs` train.epochs."""
    growth, reasons = facts.growth, []
    if rules.max_growth is not None and growth is not None and growth > rules.max_growth:
        reasons.append(f"growth {_pct(growth)} > {_pct(rules.max_growth)}")
    runs = facts.continued_runs
    if rules.max_continued_runs is not None and runs is not None and runs >= rules.max_continued_runs:
        reasons.append(f"{runs} continued runs since the last from scratch, at most {rules.max_continued_runs}")
    if rules.max_unk_rate is not None and facts.unk_rate is not None and facts.unk_rate > rules.max_unk_rate:
        reasons.append(f"<unk> {_pct(facts.unk_rate)} > {_pct(rules.max_unk_rate)}")
    if reasons:
        return Decision(True, scratch_epochs, "; ".join(reasons), facts)
    if rules.night == "replay" and facts.parent_seen:
        why = f"night: replay, {rules.replay_ratio:g} held pair(s) drawn for each new one in a pass"
        return Decision(False, rules.replay_epochs, why, facts, replay=True)
    epochs = continued_epochs(rules, growth, base_epochs)
    if growth is None:
        why = "train.continued"
    else:
        low = base_epochs if rules.min_epochs is None else rules.min_epochs
        why = f"{_epochs(base_epochs)} per +{_pct(rules.reference_growth)} growth, {low} to {rules.max_epochs}"
    if rules.night == "replay":
        why += "; every pair: the published model records no seen set to replay against"
    return Decision(False, epochs, why, facts)


def defer(rules: RetrainConfig, scratch: Decision, base_epochs: int, status: str) -> Decision:
    """The night of a decision for scratch that trains behind the nights (train.retrain.scratch:
    background): continued as `decide` would without the rules that chose scratch, with why the
    retrain is due and `status`, where that run stands."""
    lenient = dataclasses.replace(rules, max_growth=None, max_continued_runs=None, max_unk_rate=None)
    night = decide(lenient, scratch.facts, base_epochs, scratch.epochs)
    return dataclasses.replace(night, scratch_due=scratch.why, scratch_status=status)


def first_run(pairs: int, epochs: int) -> Decision:
    """The decision recorded for the first run of `init_from: published` (nothing is published
    yet: from scratch, as resolve_parent logs)."""
    return Decision(True, epochs, NOTHING_PUBLISHED, Facts(pairs))


def facts_of(parent: Checkpoint, manifest: DataManifest) -> Facts:
    """The facts of continuing `parent` on the data of `manifest` (encoded with its tokenizers)."""
    record = parent.training if isinstance(parent.training, dict) else {}
    rates = manifest.training_unk_rate if manifest.tokenizer_from is not None else None
    return Facts(
        manifest.training_pairs,
        trained_pairs(parent),
        None if rates is None else max(rates.src, rates.tgt),
        _recorded(record, "continued_runs"),
    )


def trained_pairs(checkpoint: Checkpoint) -> int | None:
    """The training pairs `checkpoint` records it was trained on (None: not recorded)."""
    return _recorded(checkpoint.training if isinstance(checkpoint.training, dict) else {}, "train_pairs")


def _recorded(record: dict[str, Any], key: str) -> int | None:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def training_record(pairs: int, parent: Checkpoint | None, decision: Decision | None) -> dict[str, Any]:
    """What a run's checkpoints record of its training (Checkpoint.training): its training
    pairs and its continued runs since a run from scratch (0: from scratch; a parent that
    records none counts as one from scratch), with the decision that started the run."""
    runs = 0
    if parent is not None:
        runs = (_recorded(parent.training or {}, "continued_runs") or 0) + 1
    out: dict[str, Any] = {"train_pairs": pairs, "continued_runs": runs}
    if decision is not None:
        out["retrain"] = decision.record()
    return out


@dataclass(frozen=True)
class Stored:
    """retrain.json: the decision a run started with."""

    run_identity: str
    parent_sha256: str | None  # of the parent it was taken on (None: nothing was published)
    decision: Decision


def read_stored(run: RunDir) -> Stored | None:
    """The run folder's stored decision (None: none, or unreadable)."""
    try:
        raw = json.loads(run.retrain.read_text(encoding="utf-8"))
        decision = Decision.from_record(raw["decision"])
        identity, parent = raw["run_identity"], raw.get("parent_sha256")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if decision is None or not isinstance(identity, str) or not isinstance(parent, (str, type(None))):
        return None
    return Stored(identity, parent, decision)


def store(run: RunDir, identity: str, parent_sha256: str | None, decision: Decision) -> None:
    record = {
        "run_identity": identity,
        "parent_sha256": parent_sha256,
        "decided": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "decision": decision.record(),
    }
    atomic_write_text(run.retrain, json.dumps(record, indent=2) + "\n")


def scratch_decided(run: RunDir, parent_sha256: str) -> bool:
    """Whether the run folder's stored decision retrains from scratch instead of continuing the
    parent of this digest: its data is then encoded with tokenizers fitted on the corpus."""
    stored = read_stored(run)
    return stored is not None and stored.decision.scratch and stored.parent_sha256 == parent_sha256
