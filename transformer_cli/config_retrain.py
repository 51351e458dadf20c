"""The `train.retrain` section of the schema: how the nightly run (train.init_from: published)
continues the published model, for how long, on which pairs, or retrains from scratch
(training/retrain_policy.py, training/replay.py, training/held_out.py, training/scratch.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .config_values import Section
from .config_values import schema_field as _f

RetrainPolicy = Literal["adaptive", "fixed"]


@dataclass
class RetrainConfig(Section):
    """How the nightly run (train.init_from: published) continues the published model when the
    corpus has changed: continue it for epochs scaled with the corpus's growth, or retrain from
    scratch (the config's train.*, model.* and a tokenizer fitted on the corpus). The defaults
    rest on Multi30k's growth curve (docs/results.md, "The growth curve"): continuing 4 epochs
    came within 0.3 BLEU of a retrain from scratch on validation at +7.4% and +10% pairs, for
    about 0.27x its CPU time; at +20% even 8 epochs (0.56x) ended 0.6 below it, at +45% 4
    epochs 1.0 below.
    Read when a run starts; a resumed run keeps the decision it started with."""

    SECTION: ClassVar[str] = "train.retrain"

    policy: RetrainPolicy = _f(
        "adaptive",
        "adaptive: decide each new run by the keys below (one line in train.log, recorded in "
        "promotions.log); fixed: always continue for train.continued.epochs.",
        resumable=True,
    )
    max_growth: float | None = _f(
        0.15,
        "Retrain from scratch when the training pairs grew by more than this share of those the "
        "published model was trained on (null: never for growth). Measured: +10% continued as "
        "well as scratch, +20% did not.",
        resumable=True,
        ge=0.0,
    )
    max_continued_runs: int | None = _f(
        14,
        "Retrain from scratch when the published model is this many continued runs from its "
        "last training from scratch (null: never for that).",
        resumable=True,
        ge=1,
    )
    max_unk_rate: float | None = _f(
        0.01,
        "Retrain from scratch when the published model's tokenizers turn more than this share "
        "of the training tokens of either side into the unknown token (null: never for that).",
        resumable=True,
        ge=0.0,
        le=1.0,
    )
    reference_growth: float = _f(
        0.10,
        "The growth train.continued.epochs suits (measured: 4 epochs at +10%, 26,364 -> 29,000 pairs): a continued "
        "run trains ceil(train.continued.epochs x growth / reference_growth) epochs, within "
        "min_epochs and max_epochs.",
        resumable=True,
        gt=0.0,
    )
    min_epochs: int | None = _f(
        None,
        "Fewest epochs of a continued run (null: train.continued.epochs; fewer for a smaller growth is not measured).",
        resumable=True,
        ge=1,
    )
    max_epochs: int = _f(
        8,
        "Most epochs of a continued run (8: 0.56x the CPU time of base.yaml's 15 from scratch; "
        "reached only with a max_growth above 0.15).",
        resumable=True,
        ge=1,
    )
    grow_vocabulary: bool = _f(
        False,
        "A continued run adds to the published model's subword vocabulary (tokenizer.kind "
        "sentencepiece) the pieces that a tokenizer fitted on today's training text (corpus and "
        "parts, with the model's tokenizer settings) has and it lacks, so that new words (a "
        "topic that corrections bring) are not spelled in fragments; every old id keeps its "
        "piece, and a new piece's embedding starts as the mean of the pieces that spell it.",
        resumable=True,
    )
    new_piece_min_count: int = _f(
        20,
        "grow_vocabulary adds a piece only when the fitted tokenizer uses it at least this many "
        "times on the training text.",
        resumable=True,
        ge=1,
    )
    max_new_pieces: int = _f(
        400,
        "grow_vocabulary adds at most this many pieces a night (the most used).",
        resumable=True,
        ge=1,
    )
    night: Literal["epochs", "replay"] = _f(
        "epochs",
        "What a continued run trains on. epochs: every pair, for the epochs above. replay: the "
        "pairs the published model's data did not hold (appended, replaced or new lines of the "
        "corpus, new synthetic lines, new corrections), replay_epochs times, each pass beside "
        "replay_ratio times as many of the pairs it held, drawn afresh (training/replay.py): a "
        "night's cost follows what changed, not the corpus.",
        added=True,
    )
    replay_ratio: float = _f(
        1.0,
        "night: replay: pairs the published model's data held, drawn for each new pair in every pass.",
        added=True,
        ge=0.0,
        le=1000.0,
    )
    replay_epochs: int = _f(4, "night: replay: passes over the new pairs.", added=True, ge=1, le=1000)
    replay_max_steps: int | None = _f(
        None,
        "night: replay: the most optimizer steps a night trains (its window; null: no cap).",
        added=True,
        ge=1,
    )
    held_out_share: float = _f(
        0.05,
        "night: replay: the share of the night's new pairs of the corpus and the corrections that "
        "it holds out of its training, chosen by a hash of each pair's text (the same whatever the "
        "order of the files), for the promotion gate to score the candidate and the published "
        "model on (training/held_out.py); none when that comes to fewer than 10 pairs (0: "
        "never). A pair is held out of that night only: the next night counts it new again.",
        added=True,
        ge=0.0,
        le=0.5,
    )
    held_out_max_pairs: int = _f(1000, "night: replay: the most new pairs held_out_share holds out.", added=True, ge=1)
    held_out_tolerance_loss: float = _f(
        0.05,
        "night: replay: the gate keeps the published model when the candidate's loss per token "
        "on the held-out new pairs is above the published model's by more than this (not "
        "measured yet; wider than train.promote_tolerance_loss: the held-out pairs are far "
        "fewer than validation's).",
        added=True,
        ge=0.0,
    )
    scratch: Literal["background", "foreground"] = _f(
        "background",
        "Where a retrain from scratch that the keys above call for trains. background: behind the "
        "nights, which never wait for it: the night continues the published model as if no key "
        "had called for scratch (its line says the retrain is due, why, and where it stands), then "
        "the model from scratch trains in checkpoints/<name>.scratch/ on the corpus as it was when "
        "it started, scratch_window_minutes at a time, until it is done and goes through the "
        "promotion gate (training/scratch.py; also `tfm train --scratch`). foreground: the night "
        "itself retrains from scratch, for train.epochs.",
        resumable=True,
        added=True,
    )
    scratch_window_minutes: float = _f(
        240.0,
        "scratch: background: the most minutes of training the run from scratch gets from each "
        "`tfm train` after its night (or `tfm train --scratch`); it saves and resumes there the "
        "next time. Preparing its data, once when it starts, is not counted.",
        resumable=True,
        added=True,
        gt=0.0,
    )
    scratch_priority: Literal["normal", "low", "idle"] = _f(
        "idle",
        "scratch: background: the priority the run from scratch trains at (train.priority's "
        "values; idle: SCHED_IDLE and niceness 19, below the night's and a server's).",
        resumable=True,
        added=True,
    )
