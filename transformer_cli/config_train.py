"""The `train:` section of the schema (and `train.continued`; `train.retrain` is
config_retrain.py's): optimization, validation, checkpoints and publication; and the choices
of device, precision and promotion policy, named once for the config's fields and every option
that takes the same values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

from .config_retrain import RetrainConfig
from .config_values import Moved, Section
from .config_values import schema_field as _f
from .config_values import schema_section as _section

Device = Literal["auto", "cpu", "cuda", "mps"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
PromotePolicy = Literal["if-better", "always", "never"]
DEVICES: tuple[str, ...] = get_args(Device)
PRECISIONS: tuple[str, ...] = get_args(Precision)
PROMOTE_POLICIES: tuple[str, ...] = get_args(PromotePolicy)


@dataclass
class ContinuedConfig(Section):
    """train.* values for a run that starts from a trained model (train.init_from); null keeps
    the train.* value. Optimizer moments, the schedule with its warmup, early stopping, the
    snapshots to average, epochs and steps always start afresh."""

    SECTION: ClassVar[str] = "train.continued"
    MOVED: ClassVar[dict[str, Moved]] = {"warmup_steps": Moved("schedule_options.warmup_steps", None)}

    epochs: int | None = _f(
        None,
        "Epochs of a continued run (train.epochs when null); train.retrain scales them with the corpus's growth.",
        ge=1,
    )
    lr: float | None = _f(None, "Peak learning rate of a continued run.", gt=0.0)
    schedule_options: dict[str, Any] = _f(
        {},
        "train.schedule_options of a continued run, key by key over the train's (e.g. warmup_steps for inverse_sqrt).",
        added=True,
    )
    snapshot_every_steps: int | None = _f(None, "train.snapshot_every_steps of a continued run.", ge=1)
    average_last: int | None = _f(None, "train.average_last of a continued run.", ge=1)


@dataclass
class TrainConfig(Section):
    """Optimization, validation, checkpoints and publication. Keys marked resumable may change
    between sessions of a run without starting it over."""

    SECTION: ClassVar[str] = "train"
    # Keys that moved into the built-ins' own settings (read, with a warning, until removed).
    MOVED: ClassVar[dict[str, Moved]] = {
        "betas": Moved("optimizer_options.betas", [0.9, 0.98]),
        "eps": Moved("optimizer_options.eps", 1e-9),
        "weight_decay": Moved("optimizer_options.weight_decay", 0.0),
        "label_smoothing": Moved("criterion_options.label_smoothing", 0.0),
        "rdrop_alpha": Moved("criterion_options.rdrop_alpha", 0.0),
        "warmup_steps": Moved("schedule_options.warmup_steps", 0),
        "source_lowercase": Moved("transform_options.source_noise.lowercase", 0.0),
        "source_uppercase": Moved("transform_options.source_noise.uppercase", 0.0),
        "source_unpunctuated": Moved("transform_options.source_noise.unpunctuated", 0.0),
    }

    epochs: int = _f(10, "Passes over the training data.", resumable=True, ge=1)
    max_steps: int | None = _f(None, "Stop after this many optimizer steps.", resumable=True, ge=1)
    batch_size: int | None = _f(128, "Sentences per batch (exclusive with batch_tokens).", ge=1, le=1_000_000)
    batch_tokens: int | None = _f(
        None, "Token budget per batch, padded, longer side (exclusive with batch_size).", ge=16, le=100_000_000
    )
    accumulate: int = _f(1, "Batches per optimizer step (gradient accumulation).", ge=1, le=100_000)
    optimizer: str = _f("adam", "adam, adamw (decoupled weight decay), or one a plugin registers (seams.OPTIMIZERS).")
    optimizer_options: dict[str, Any] = _f(
        {}, "The optimizer's own settings (adam, adamw: betas, eps, weight_decay).", added=True
    )
    lr: float = _f(5e-4, "Learning rate (the peak, after warmup, with inverse_sqrt).", gt=0.0)
    clip_norm: float | None = _f(1.0, "Clip the gradient norm to this (null: no clipping).", gt=0.0)
    transforms: list[str] = _f(
        ["source_noise"],
        "Changes to the training pairs' text, drawn per "
        "batch, in this order, by name (seams.TRANSFORMS; a plugin may add "
        "more); each with its settings in transform_options.",
        added=True,
    )
    transform_options: dict[str, Any] = _f(
        {},
        "Each transform's own settings, by its name (source_noise: lowercase, uppercase, unpunctuated).",
        added=True,
    )
    criterion: str = _f(
        "cross_entropy",
        "The training loss by name (seams.CRITERIA): cross_entropy "
        "(label smoothing, R-Drop), or one a plugin registers.",
        added=True,
    )
    criterion_options: dict[str, Any] = _f(
        {}, "The criterion's own settings (cross_entropy: label_smoothing, rdrop_alpha).", added=True
    )
    schedule: str = _f(
        "constant",
        "Learning-rate schedule: constant, inverse_sqrt (the paper's "
        "warmup then 1/sqrt(step)), or one a plugin registers (seams.SCHEDULES).",
    )
    schedule_options: dict[str, Any] = _f({}, "The schedule's own settings (inverse_sqrt: warmup_steps).", added=True)
    seed: int = _f(1234, "Seed of weights, dropout and batch order (a run is reproducible).")
    device: Device = _f("auto", "auto: cuda, then mps, then cpu.", resumable=True)
    precision: Precision = _f(
        "auto",
        "auto: bf16 where native (AVX512-BF16/AMX CPUs, Ampere+ GPUs), fp16 + GradScaler on older GPUs, else fp32.",
        resumable=True,
    )
    compile: bool = _f(False, "torch.compile the model.", resumable=True)
    collective_timeout_min: float = _f(
        30.0,
        "Under torchrun: how long a rank waits in a "
        "collective for the others (validating, saving, or gone) "
        "before it fails with an error instead of hanging.",
        resumable=True,
        ge=1.0,
        le=1440.0,
    )
    rendezvous_timeout_s: float = _f(
        120.0,
        "Under torchrun or another launcher: how long the "
        "processes wait for each other to start, at MASTER_ADDR:"
        "MASTER_PORT, before each exits with one line.",
        resumable=True,
        ge=1.0,
        le=86400.0,
    )
    threads: int | Literal["auto"] | None = _f(
        "auto",
        "Intra-op CPU threads. auto: start with the CPUs this process may use that other work "
        "left free over 0.3 s (at least 1) and re-choose "
        "the count during the run from the measured step speed and CPU load (fewer beside busy "
        "work; one line in the log per change; under torchrun: the CPUs / local processes, fixed; "
        "on a GPU: fixed). A number fixes it (exact resume needs a fixed count). null: as auto.",
        resumable=True,
        ge=1,
        le=4096,
    )
    priority: Literal["normal", "low", "idle"] = _f(
        "normal",
        "Scheduling priority of `tfm train` against other work on the machine: normal "
        "(as started); low (nice 10, SCHED_BATCH, lowest best-effort I/O: a `tfm serve` on the same "
        "machine keeps precedence, an otherwise idle machine still trains at full speed); idle "
        "(SCHED_IDLE: runs only on CPUs nothing else wants).",
        resumable=True,
    )
    data_workers: int | None = _f(
        None,
        "Processes that read, augment and pad the training batches "
        "ahead of the step (0: the training process does it; null: one per "
        "CPU the training threads leave free, 1 to 4). The batches are the "
        "same whatever the number.",
        resumable=True,
        ge=0,
        le=64,
    )
    valid_every: int | None = _f(None, "Also validate every N steps (null: once per epoch).", resumable=True, ge=1)
    valid_bleu: bool = _f(False, "Also decode the validation set and log sacreBLEU/chrF.", resumable=True)
    valid_decode: str = _f(
        "greedy",
        "Decoding for validation BLEU: a search strategy (seams.SEARCH_STRATEGIES): greedy, beam (with "
        "decode.beam_size), or one a plugin registers (with decode.strategy_options).",
        resumable=True,
    )
    patience: int | None = _f(None, "Stop after this many validations without improvement.", resumable=True, ge=1)
    checkpoint_every_steps: int | None = _f(None, "Also save last.pt every N steps.", resumable=True, ge=1)
    checkpoint_every_minutes: float | None = _f(5.0, "Also save last.pt every N minutes.", resumable=True, gt=0.0)
    average_last: int = _f(
        1,
        "Average the last N snapshots' weights at the end (kept if it "
        "validates better). A snapshot is taken at every epoch's end, and every "
        "snapshot_every_steps steps when that is set.",
        resumable=True,
        ge=1,
    )
    snapshot_every_steps: int | None = _f(
        None,
        "Also take a snapshot for averaging every N optimizer steps (null: at epoch ends only).",
        resumable=True,
        ge=1,
    )
    promote: PromotePolicy = _f("if-better", "When best.pt replaces published.pt (also --promote).", resumable=True)
    promote_metric: Literal["valid_loss", "valid_bleu"] = _f(
        "valid_loss",
        "What the gate compares (valid_bleu is used anyway when tokenizers differ, unless the "
        "candidate's vocabulary grows the published one's: train.retrain.grow_vocabulary).",
        resumable=True,
    )
    promote_margin_loss: float = _f(
        0.0, "Validation loss must drop by at least this to promote.", resumable=True, ge=0.0
    )
    promote_margin_bleu: float = _f(
        0.2, "Validation BLEU must rise by at least this to promote.", resumable=True, ge=0.0, le=100.0
    )
    promote_tolerance_loss: float = _f(
        0.01,
        "A model that continued the published one on more pairs (the nightly run on a grown corpus) "
        "is promoted unless its validation loss is above the best published one's by more than this "
        "(seeds of base.yaml differ by up to 0.016).",
        resumable=True,
        ge=0.0,
    )
    promote_tolerance_bleu: float = _f(
        0.3,
        "The same, when BLEU decides: promoted unless its validation BLEU is lower by more than this.",
        resumable=True,
        ge=0.0,
        le=100.0,
    )
    promote_min_bleu: float | None = _f(
        None, "Greedy validation BLEU a model must reach to be published at all.", resumable=True, ge=0.0, le=100.0
    )
    keep_published: int = _f(3, "Replaced published models kept in published.history/.", resumable=True, ge=1, le=100)
    out_dir: str = _f("checkpoints", "Where runs go (<out_dir>/<name>/).", resumable=True)
    init_from: str | None = _f(
        None,
        "Start a new run from a trained model instead of random "
        "weights (also --init-from): a tfm checkpoint file, or `published` "
        "(this run's published model when a run starts anew, i.e. when the "
        "corpus or settings changed; from scratch while none is published). "
        "The new run takes its weights, its architecture (model.* but the "
        "dropouts: differing keys are listed in a warning) and its "
        "tokenizers (the corpus is encoded with them, nothing is fitted); "
        "train.continued gives its schedule.",
    )
    continued: ContinuedConfig = _section(
        ContinuedConfig, "Settings of a run that starts from train.init_from's model."
    )
    retrain: RetrainConfig = _section(
        RetrainConfig,
        "When the nightly run (init_from: published) continues and for how long, or retrains from scratch.",
        resumable=True,
    )
    tensorboard: bool = _f(False, "Also write TensorBoard logs (needs the tensorboard extra).", resumable=True)
