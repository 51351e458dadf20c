"""Typed configuration: schema, YAML loading, `--set` overrides and validation.

A config is a YAML mapping with the sections `data`, `tokenizer`, `model`, `train`, `decode`, `serve`
(each a dataclass below) plus an optional `name`. Every problem is reported as one
`UsageError` line naming the key and where its value came from (the file and line of the
`extends:` chain that set it, or the `--set`), e.g.
``configs/x.yaml:12: model.n_heads=7 must divide model.d_model=256``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from .config_values import ConfigError, apply_override, build_section
from .errors import UsageError
from .registry import load_plugins

# Choices named once, for the config's fields and every option that takes the same values.
Device = Literal["auto", "cpu", "cuda", "mps"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
PromotePolicy = Literal["if-better", "always", "never"]
DEVICES: tuple[str, ...] = get_args(Device)
PRECISIONS: tuple[str, ...] = get_args(Precision)
PROMOTE_POLICIES: tuple[str, ...] = get_args(PromotePolicy)


def _bounds(ge: float | None = None, le: float | None = None, gt: float | None = None,
            lt: float | None = None) -> dict[str, float | None]:
    return {"ge": ge, "le": le, "gt": gt, "lt": lt}


def _f(default: Any, help: str, resumable: bool = False, added: bool = False, **bounds: float) -> Any:
    """A dataclass field: its default, help text, optional numeric bounds (ge/le/gt/lt), for
    train keys whether it may change between sessions of one run without starting it over,
    and whether it was `added` to a section after runs were first saved: such a key, at its
    default (which keeps the behaviour from before it), is left out of run identities, so a
    run of an earlier version still resumes (training/run_dir.py)."""
    metadata = {**_bounds(**bounds), "help": help, "resumable": resumable, "added": added}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def _section(cls: type, help: str) -> Any:
    """A nested section (a dataclass) as a field."""
    return field(default_factory=cls, metadata={"help": help})


@dataclass
class SplitsConfig:
    """File stems of each split inside the source: `<stem>.<lang>` or `<stem>.<lang>.gz`."""

    train: str = _f("train", "File stem of the training split.")
    val: str = _f("val", "File stem of the validation split (model selection, early stopping).")
    test: str = _f("test_2016_flickr", "File stem of the test split (`tfm evaluate --split test`).")


@dataclass
class DataConfig:
    """Where the parallel corpus comes from and which pairs are trained on."""

    corpus: Literal["multi30k", "files"] = _f(
        "multi30k", "multi30k: Multi30k task 1 with built-in checksums; files: your own corpus.")
    source: str | None = _f(None, "Folder or URL holding the corpus files (else $TFM_DATA_SOURCE, "
                            "else the source the last preprocess recorded, else Multi30k's URL).")
    src_lang: str = _f("de", "Source language code (the file suffix).")
    tgt_lang: str = _f("en", "Target language code (the file suffix).")
    splits: SplitsConfig = _section(SplitsConfig, "File stems of the splits.")
    sha256: dict[str, str] = _f({}, "Expected SHA-256 per file name, e.g. {train.de.gz: ...}.")
    dir: str = _f("data", "Where preprocessed data goes (<dir>/<name>/).")
    cache_dir: str = _f("data/cache", "Where downloads are cached.")
    train_max_len: int = _f(100, "Training pairs with a side longer than this many tokens are "
                            "dropped.", ge=1, le=16384)
    limit_train: int | None = _f(None, "Keep only the first N training pairs (smoke tests).", ge=1)
    min_train_pairs: int = _f(100, "Fewer training pairs than this after filtering is an error.",
                              ge=1)
    shard_tokens: int = _f(100_000_000, "Token ids (both sides) per file of the preprocessed, "
                           "memory-mapped splits: no file grows with the corpus.", ge=1000)


@dataclass
class TokenizerConfig:
    """How text becomes token ids (fitted on the training split only)."""

    kind: Literal["spacy", "sentencepiece"] = _f(
        "sentencepiece", "spacy: rule-based words (spacy.blank); sentencepiece: learned subwords.")
    lowercase: bool = _f(False, "Lowercase all text (output is lowercase; BLEU is then "
                         "case-insensitive).")
    min_freq: int = _f(2, "spacy: words seen fewer times become <unk>.", ge=1)
    max_vocab: int | None = _f(None, "spacy: keep at most this many words per language.", ge=5,
                               le=2_000_000)
    model_type: Literal["bpe", "unigram"] = _f("bpe", "sentencepiece: the subword algorithm.")
    vocab_size: int = _f(8000, "sentencepiece: vocabulary size (per side, or shared when joint).",
                         ge=16, le=1_000_000)
    joint: bool = _f(True, "sentencepiece: one vocabulary for both languages (needed by "
                     "model.share_embeddings).")
    character_coverage: float = _f(1.0, "sentencepiece: share of characters covered by the "
                                   "vocabulary.", gt=0.9, le=1.0)
    fit_sample: int = _f(1_000_000, "sentencepiece: fitted on a random sample of at most this many "
                         "training pairs (the same sample every time; all pairs when fewer), which "
                         "bounds preprocessing's memory.", ge=100)
    sampling: float = _f(0.0, "sentencepiece: subword regularization of the training split, "
                         "re-sampled for every batch: BPE-dropout probability (bpe) or sampling "
                         "smoothing alpha (unigram); 0: off. The draws are SentencePiece's and do "
                         "not repeat across processes (a resumed run draws anew). Evaluation is "
                         "always deterministic.",
                         ge=0.0, lt=1.0)


@dataclass
class ModelConfig:
    """The encoder-decoder Transformer (Vaswani et al. 2017); names follow the paper. Another
    architecture (model/builders.register_architecture) may extend this section with its own
    keys: a config's `model:` is read with the class registered for its `architecture`."""

    @classmethod
    def section_class(cls, raw: Any) -> type:
        """The dataclass a `model:` mapping is read with (config_values.build_section)."""
        name = (raw.get("architecture") if isinstance(raw, dict) else None) or "transformer"
        if name not in MODEL_SETTINGS and name != "transformer":
            load_plugins("architectures")  # an installed package may register it
        return MODEL_SETTINGS.get(name, cls)

    d_model: int = _f(256, "Width of embeddings and every layer's output.", ge=8, le=16384)
    n_heads: int = _f(8, "Attention heads (must divide d_model).", ge=1, le=256)
    n_encoder_layers: int = _f(3, "Encoder layers (N in the paper).", ge=1, le=128)
    n_decoder_layers: int = _f(3, "Decoder layers.", ge=1, le=128)
    d_ff: int = _f(512, "Inner width of the position-wise feed-forward network.", ge=1, le=131072)
    dropout: float = _f(0.1, "Dropout on embeddings and sub-layer outputs (P_drop).", ge=0.0, lt=1.0)
    attention_dropout: float = _f(0.0, "Dropout on attention weights.", ge=0.0, lt=1.0)
    activation_dropout: float = _f(0.0, "Dropout inside the feed-forward network.", ge=0.0, lt=1.0)
    activation: Literal["relu", "gelu", "swish"] = _f(
        "relu", "Feed-forward activation (gelu: the exact, erf-based one; swish: SiLU, as opus-mt "
        "models use).")
    positional: Literal["learned", "sinusoidal"] = _f(
        "sinusoidal", "Positional encodings: the paper's sinusoids or a learned table.")
    max_len: int = _f(256, "Longest sequence in tokens (positions); longer inputs are truncated.",
                      ge=4, le=16384)
    norm: Literal["post", "pre"] = _f("post", "LayerNorm after each residual (the paper) or before "
                                      "each sub-layer (pre-LN, more stable at high rates).")
    tie_output: bool = _f(False, "Output projection shares the target embedding matrix.")
    share_embeddings: bool = _f(False, "Source and target share one embedding matrix (joint "
                                "vocabulary).")
    architecture: str = _f("transformer", "The model family: a name registered in "
                           "model/builders.py (ARCHITECTURES), built with this section.", added=True)
    scale_embeddings: bool = _f(True, "Multiply token embeddings by sqrt(d_model) (paper §3.4; "
                                "transformers' scale_embedding).", added=True)
    output_bias: bool = _f(False, "A bias on the output projection (Marian's final_logits_bias).",
                           added=True)
    sinusoid_layout: Literal["interleaved", "halves"] = _f(
        "interleaved", "positional: sinusoidal: the sine and cosine of each frequency side by side "
        "(dimensions 2i, 2i+1: tfm's) or all sines, then all cosines (transformers' Marian).",
        added=True)


# model.architecture -> the dataclass of its `model:` section (filled by model/builders.py).
MODEL_SETTINGS: dict[str, type[ModelConfig]] = {}


@dataclass
class ContinuedConfig:
    """train.* values for a run that starts from a trained model (train.init_from); null keeps
    the train.* value. Optimizer moments, the schedule with its warmup, early stopping, the
    snapshots to average, epochs and steps always start afresh."""

    epochs: int | None = _f(None, "Epochs of a continued run (train.epochs when null).", ge=1)
    lr: float | None = _f(None, "Peak learning rate of a continued run.", gt=0.0)
    warmup_steps: int | None = _f(None, "Warmup steps of a continued run (inverse_sqrt).", ge=0)
    snapshot_every_steps: int | None = _f(None, "train.snapshot_every_steps of a continued run.",
                                          ge=1)
    average_last: int | None = _f(None, "train.average_last of a continued run.", ge=1)


@dataclass
class TrainConfig:
    """Optimization, validation, checkpoints and publication. Keys marked resumable may change
    between sessions of a run without starting it over."""

    epochs: int = _f(10, "Passes over the training data.", resumable=True, ge=1)
    max_steps: int | None = _f(None, "Stop after this many optimizer steps.", resumable=True, ge=1)
    batch_size: int | None = _f(128, "Sentences per batch (exclusive with batch_tokens).", ge=1,
                                le=1_000_000)
    batch_tokens: int | None = _f(None, "Token budget per batch, padded, longer side (exclusive "
                                  "with batch_size).", ge=16, le=100_000_000)
    accumulate: int = _f(1, "Batches per optimizer step (gradient accumulation).", ge=1, le=100_000)
    optimizer: Literal["adam", "adamw"] = _f("adam", "Adam, or AdamW (decoupled weight decay).")
    lr: float = _f(5e-4, "Learning rate (the peak, after warmup, with inverse_sqrt).", gt=0.0)
    betas: list[float] = _f([0.9, 0.98], "Adam's beta1, beta2.")
    eps: float = _f(1e-9, "Adam's epsilon.", gt=0.0)
    weight_decay: float = _f(0.0, "Weight decay.", ge=0.0)
    clip_norm: float | None = _f(1.0, "Clip the gradient norm to this (null: no clipping).", gt=0.0)
    label_smoothing: float = _f(0.0, "Label smoothing (epsilon_ls; the paper uses 0.1).", ge=0.0,
                                lt=1.0)
    rdrop_alpha: float = _f(0.0, "R-Drop weight alpha (Liang et al. 2021): each batch goes through "
                            "the model twice under different dropout, and alpha times the symmetric "
                            "KL of the two outputs joins their mean loss. 0: off. Doubles the step "
                            "cost.", ge=0.0, le=1000.0)
    source_lowercase: float = _f(0.0, "Share of training sources lowercased, drawn per batch and "
                                 "epoch (robustness to lowercase input; targets keep their case).",
                                 ge=0.0, le=1.0)
    source_uppercase: float = _f(0.0, "Share of training sources written in capitals, drawn per "
                                 "batch and epoch.", ge=0.0, le=1.0)
    source_unpunctuated: float = _f(0.0, "Share of training sources without their final "
                                    "punctuation, drawn per batch and epoch.", ge=0.0, le=1.0)
    schedule: Literal["constant", "inverse_sqrt"] = _f(
        "constant", "Learning-rate schedule: constant, or the paper's warmup then 1/sqrt(step).")
    warmup_steps: int = _f(0, "Warmup steps of the inverse_sqrt schedule.", ge=0)
    seed: int = _f(1234, "Seed of weights, dropout and batch order (a run is reproducible).")
    device: Device = _f(
        "auto", "auto: cuda, then mps, then cpu.", resumable=True)
    precision: Precision = _f(
        "auto", "auto: bf16 where native (AVX512-BF16/AMX CPUs, Ampere+ GPUs), fp16 + GradScaler "
        "on older GPUs, else fp32.", resumable=True)
    compile: bool = _f(False, "torch.compile the model.", resumable=True)
    collective_timeout_min: float = _f(30.0, "Under torchrun: how long a rank waits in a "
                                       "collective for the others (validating, saving, or gone) "
                                       "before it fails with an error instead of hanging.",
                                       resumable=True, ge=1.0, le=1440.0)
    threads: int | None = _f(None, "Intra-op CPU threads (null: the CPUs this process may use).",
                             resumable=True, ge=1, le=4096)
    data_workers: int | None = _f(None, "Processes that read, augment and pad the training batches "
                                  "ahead of the step (0: the training process does it; null: one per "
                                  "CPU the training threads leave free, 1 to 4). The batches are the "
                                  "same whatever the number.", resumable=True, ge=0, le=64)
    valid_every: int | None = _f(None, "Also validate every N steps (null: once per epoch).",
                                 resumable=True, ge=1)
    valid_bleu: bool = _f(False, "Also decode the validation set and log sacreBLEU/chrF.",
                          resumable=True)
    valid_decode: Literal["greedy", "beam"] = _f(
        "greedy", "Decoding for validation BLEU: greedy, or beam search with decode.beam_size.",
        resumable=True)
    patience: int | None = _f(None, "Stop after this many validations without improvement.",
                              resumable=True, ge=1)
    checkpoint_every_steps: int | None = _f(None, "Also save last.pt every N steps.",
                                            resumable=True, ge=1)
    checkpoint_every_minutes: float | None = _f(5.0, "Also save last.pt every N minutes.",
                                                resumable=True, gt=0.0)
    average_last: int = _f(1, "Average the last N snapshots' weights at the end (kept if it "
                           "validates better). A snapshot is taken at every epoch's end, and every "
                           "snapshot_every_steps steps when that is set.", resumable=True, ge=1)
    snapshot_every_steps: int | None = _f(None, "Also take a snapshot for averaging every N "
                                          "optimizer steps (null: at epoch ends only).",
                                          resumable=True, ge=1)
    promote: PromotePolicy = _f(
        "if-better", "When best.pt replaces published.pt (also --promote).", resumable=True)
    promote_metric: Literal["valid_loss", "valid_bleu"] = _f(
        "valid_loss", "What the gate compares (valid_bleu is used anyway when tokenizers differ).",
        resumable=True)
    promote_margin_loss: float = _f(0.0, "Validation loss must drop by at least this to promote.",
                                    resumable=True, ge=0.0)
    promote_margin_bleu: float = _f(0.2, "Validation BLEU must rise by at least this to promote.",
                                    resumable=True, ge=0.0, le=100.0)
    promote_min_bleu: float | None = _f(None, "Greedy validation BLEU a model must reach to be "
                                        "published at all.", resumable=True, ge=0.0, le=100.0)
    keep_published: int = _f(3, "Replaced published models kept in published.history/.",
                             resumable=True, ge=1, le=100)
    out_dir: str = _f("checkpoints", "Where runs go (<out_dir>/<name>/).", resumable=True)
    init_from: str | None = _f(None, "Start a new run from a trained model instead of random "
                               "weights (also --init-from): a tfm checkpoint file, or `published` "
                               "(this run's published model when a run starts anew, i.e. when the "
                               "corpus or settings changed; from scratch while none is published). "
                               "The new run takes its weights, its architecture (model.* but the "
                               "dropouts: differing keys are listed in a warning) and its "
                               "tokenizers (the corpus is encoded with them, nothing is fitted); "
                               "train.continued gives its schedule.")
    continued: ContinuedConfig = _section(ContinuedConfig, "Settings of a run that starts from "
                                          "train.init_from's model.")
    tensorboard: bool = _f(False, "Also write TensorBoard logs (needs the tensorboard extra).",
                           resumable=True)


@dataclass
class DecodeConfig:
    """Translation by `tfm translate`, `tfm evaluate` and the Python API."""

    beam_size: int = _f(1, "1: greedy search; more: beam search.", ge=1, le=256)
    n_best: int = _f(1, "Hypotheses returned per input (<= beam_size).", ge=1, le=256)
    length_penalty: float = _f(1.0, "Beam scores are divided by length^penalty (0: none).", ge=0.0,
                               le=100.0)
    max_len_a: float = _f(1.5, "Longest output: max_len_a * source length + max_len_b tokens.",
                          ge=0.0, le=100.0)
    max_len_b: int = _f(10, "See max_len_a.", ge=1, le=16384)
    batch_size: int = _f(128, "Sentences decoded together.", ge=1, le=100_000)
    recase: bool = _f(True, "Give sources typed all lowercase or all in capitals the casing of "
                      "the training sources before translating (each word's most frequent "
                      "spelling); sources with any casing are left as typed.")
    ensemble: list[str] = _f([], "Models that translate together by default (translate, evaluate "
                             "and serve without --checkpoint): checkpoint files or Hugging Face "
                             "folders with the same vocabularies, one beam over their combined "
                             "predictions; empty: the run's published model alone.")
    ensemble_weights: list[float] | None = _f(None, "One weight per ensemble model (null: equal).")
    ensemble_combine: Literal["log", "prob"] = _f(
        "log", "How an ensemble combines its models' next-token distributions: log (the weighted "
        "mean of their log-probabilities) or prob (of their probabilities).")


@dataclass
class DistillConfig:
    """Sequence-level knowledge distillation (training/distill.py): the training targets are the
    teachers' beam-search translations of the training sources (`tfm distill`, or the first
    `tfm preprocess`/`tfm train` that needs them; resumable)."""

    teachers: list[str] = _f([], "Teacher models (checkpoints or Hugging Face folders; several: an "
                             "ensemble); empty: no distillation.")
    beam_size: int = _f(5, "The teachers' beam.", ge=1, le=256)
    combine: Literal["log", "prob"] = _f("log", "How several teachers combine (decode.ensemble_combine).")
    weights: list[float] | None = _f(None, "One weight per teacher (null: equal).")
    keep_original: bool = _f(False, "Train on the original pairs as well as the teachers' "
                             "translations of their sources.")
    batch_size: int = _f(128, "Sentences the teachers decode together.", ge=1, le=100_000)
    chunk_lines: int = _f(1000, "Sources translated, then saved, at a time: where a stopped "
                          "distillation resumes.", ge=1, le=10_000_000)


@dataclass
class ServeConfig:
    """`tfm serve`: where it listens, how it batches, what it accepts (see serving/)."""

    host: str = _f("127.0.0.1", "Address to listen on (also --host).")
    port: int = _f(8000, "Port (also --port; 0: any free port).", ge=0, le=65535)
    threads: int | None = _f(None, "torch intra-op threads (null: half the cores, leaving the rest "
                             "to a nightly retrain).", ge=1, le=1024)
    batch_tokens: int = _f(2048, "Source tokens per batch (one input may exceed it).", ge=1,
                           le=1_000_000)
    max_wait_ms: float = _f(20.0, "Longest wait of a batch for the clients it just answered to "
                            "send again (a lone client never waits).", ge=0.0, le=10_000.0)
    max_inputs: int = _f(64, "Sentences per request (more: 413).", ge=1, le=100_000)
    max_bytes: int = _f(65536, "Request body size in bytes (more: 413).", ge=64, le=1 << 30)
    max_beam_size: int = _f(8, "Largest beam_size a request may ask for.", ge=1, le=256)
    reload_poll_s: float = _f(2.0, "How often the model file is checked for a new version.",
                              ge=0.01, le=3600.0)
    body_timeout_s: float = _f(30.0, "Seconds a client has to send a whole request body, from "
                               "its headers on (slower: 408).", ge=0.1, le=3600.0)
    shutdown_grace_s: float = _f(30.0, "On SIGTERM, seconds the requests in flight get to finish; "
                                 "then they are answered 503 and the server exits.", ge=0.0,
                                 le=3600.0)
    token_env: str = _f("TFM_SERVE_TOKEN", "Environment variable holding the bearer token.")
    token_file: str | None = _f(None, "Or a file holding it (read at start).")


@dataclass
class Config:
    name: str = _f("run", "Run name: data/<name>/ and checkpoints/<name>/ (default: the file's "
                   "stem).")
    data: DataConfig = _section(DataConfig, "The corpus.")
    tokenizer: TokenizerConfig = _section(TokenizerConfig, "Tokenization.")
    model: ModelConfig = _section(ModelConfig, "The Transformer.")
    train: TrainConfig = _section(TrainConfig, "Training and publication.")
    decode: DecodeConfig = _section(DecodeConfig, "Translation.")
    distill: DistillConfig = _section(DistillConfig, "Distillation from teacher models.")
    serve: ServeConfig = _section(ServeConfig, "The HTTP server.")

    @property
    def data_dir(self) -> Path:
        """Where `tfm preprocess` writes this config's encoded corpus."""
        return Path(self.data.dir) / self.name

    @property
    def run_dir(self) -> Path:
        """Where `tfm train` writes this config's run (checkpoints, metrics, logs)."""
        return Path(self.train.out_dir) / self.name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)



# --------------------------------------------------------------------------- validation

def validate(cfg: Config) -> None:
    """Checks that involve more than one key (a ConfigError holding the keys, the culprit first)."""
    m, t, tr, d = cfg.model, cfg.tokenizer, cfg.train, cfg.data
    if m.d_model % m.n_heads:
        raise ConfigError(f"model.n_heads={m.n_heads} must divide model.d_model={m.d_model}",
                          "model.n_heads", "model.d_model")
    if m.positional == "sinusoidal" and m.d_model % 2:
        raise ConfigError(f"model.d_model={m.d_model} must be even for sinusoidal positions",
                          "model.d_model", "model.positional")
    if t.sampling and t.kind != "sentencepiece":
        raise ConfigError("tokenizer.sampling needs tokenizer.kind: sentencepiece (spaCy words "
                          "have one segmentation)", "tokenizer.sampling", "tokenizer.kind")
    if tr.source_lowercase + tr.source_uppercase > 1.0:
        raise ConfigError("train.source_lowercase + train.source_uppercase must be at most 1",
                          "train.source_lowercase", "train.source_uppercase")
    if m.share_embeddings and not (t.kind == "sentencepiece" and t.joint):
        raise ConfigError("model.share_embeddings needs a joint vocabulary (tokenizer.kind: "
                          "sentencepiece with tokenizer.joint: true)", "model.share_embeddings",
                          "tokenizer.kind", "tokenizer.joint")
    if tr.batch_size is None and tr.batch_tokens is None:
        raise ConfigError("set train.batch_size (sentences) or train.batch_tokens (token budget)",
                          "train.batch_size", "train.batch_tokens")
    if tr.batch_size is not None and tr.batch_tokens is not None:
        raise ConfigError("train.batch_size and train.batch_tokens are exclusive: set one to null",
                          "train.batch_size", "train.batch_tokens")
    if len(tr.betas) != 2 or not all(0.0 <= b < 1.0 for b in tr.betas):
        raise ConfigError(f"train.betas must be two numbers in [0, 1) (got {tr.betas})",
                          "train.betas")
    if tr.schedule == "inverse_sqrt" and tr.warmup_steps < 1:
        raise ConfigError("train.schedule: inverse_sqrt needs train.warmup_steps >= 1",
                          "train.warmup_steps", "train.schedule")
    if cfg.decode.n_best > cfg.decode.beam_size:
        raise ConfigError(f"decode.n_best={cfg.decode.n_best} must be <= "
                          f"decode.beam_size={cfg.decode.beam_size}", "decode.n_best",
                          "decode.beam_size")
    dc = cfg.decode
    if dc.ensemble_weights is not None and (len(dc.ensemble_weights) != len(dc.ensemble)
                                            or not all(w > 0 for w in dc.ensemble_weights)):
        raise ConfigError(f"decode.ensemble_weights must be one positive number per model of "
                          f"decode.ensemble ({len(dc.ensemble)})", "decode.ensemble_weights",
                          "decode.ensemble")
    if cfg.distill.weights is not None and len(cfg.distill.weights) != len(cfg.distill.teachers):
        raise ConfigError(f"distill.weights must be one number per teacher ({len(cfg.distill.teachers)})",
                          "distill.weights", "distill.teachers")
    if d.src_lang == d.tgt_lang:
        raise ConfigError(f"data.src_lang and data.tgt_lang are both '{d.src_lang}'",
                          "data.src_lang", "data.tgt_lang")
    if m.positional == "learned" and m.max_len < d.train_max_len + 2:
        raise ConfigError(f"model.max_len={m.max_len} must be >= data.train_max_len + 2 "
                          f"= {d.train_max_len + 2} with learned positions", "model.max_len",
                          "data.train_max_len", "model.positional")
    if tr.init_from is not None and not tr.init_from.strip():
        raise ConfigError("train.init_from must name a checkpoint file or be `published` (null: "
                          "start from random weights)", "train.init_from")
    if not cfg.name or "/" in cfg.name or cfg.name.startswith("."):
        raise ConfigError(f"name={cfg.name!r} must be a plain directory name", "name")


# --------------------------------------------------------------------------- loading

class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first_line[key]})",
                    key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)



def packaged_configs() -> dict[str, Path]:
    """Config files shipped inside the installed package, by file name."""
    root = resources.files("transformer_cli.configs")
    return {p.name: Path(str(p)) for p in root.iterdir() if p.name.endswith((".yaml", ".yml"))}


def resolve_config_path(spec: str, beside: Path | None = None) -> Path:
    """Find a config: in the folder `beside` (that of a config naming it in `extends:`), then
    the path as given, then ./configs/, then the copies shipped with tfm."""
    names = [spec] if spec.endswith((".yaml", ".yml")) else [spec, spec + ".yaml"]
    folders = list(dict.fromkeys([*([beside] if beside is not None else []), Path("."),
                                  Path("configs")]))
    for name in names:
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
        shipped = packaged_configs().get(Path(name).name)
        if shipped is not None and Path(name).name == name:
            return shipped
    shipped_names = ", ".join(sorted(packaged_configs()))
    raise UsageError(f"config file not found: {spec!r} (looked in {', '.join(map(str, folders))} "
                     f"and the configs shipped with tfm: {shipped_names})")


Origins = dict[str, str]  # dotted key -> "file:line" of the YAML that set it


def _read_mapping(path: Path) -> tuple[dict[str, Any], Origins]:
    """A config file's YAML mapping and where each of its keys is, or a UsageError naming the
    file (and line)."""
    try:
        loader = _StrictLoader(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            raw = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{where}: YAML syntax error: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read config: {e}") from None
    if raw is None or raw == {}:
        raise UsageError(f"{path}: the config is empty: give at least one section (copy one of "
                         "the shipped configs, e.g. base.yaml, to start from its values)")
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: the config must be a YAML mapping of sections")
    return raw, _key_lines(node, path)


def _key_lines(node: yaml.Node, path: Path, prefix: str = "") -> Origins:
    """`file:line` of every key in a YAML mapping node, nested keys dotted (model.n_heads)."""
    lines: Origins = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}"
            lines[key] = f"{path}:{key_node.start_mark.line + 1}"
            lines.update(_key_lines(value_node, path, f"{key}."))
    return lines


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """`child` over `parent`, section by section (a child's section updates the parent's)."""
    merged = dict(parent)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "sha256":
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolved_mapping(path: Path, chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Origins]:
    """The file's mapping with its `extends:` parents merged in (the parent is found beside the
    file first, then like any config name), and where each key was set: the file and line that
    gave its value, a child's over its parent's."""
    raw, origins = _read_mapping(path)
    parent = raw.pop("extends", None)
    if parent is None:
        return raw, origins
    where = origins["extends"]
    if not isinstance(parent, str):
        raise UsageError(f"{where}: extends must be a config file name (got {parent!r})")
    try:
        parent_path = resolve_config_path(parent, beside=path.parent)
    except UsageError as e:
        raise UsageError(f"{where}: extends: {e}") from None
    if parent_path.resolve() in {p.resolve() for p in (*chain, path)}:
        raise UsageError(f"{where}: extends {parent} makes a cycle")
    inherited, inherited_origins = _resolved_mapping(parent_path, (*chain, path))
    inherited.pop("name", None)  # a name is never inherited
    inherited_origins.pop("name", None)
    return _merge(inherited, raw), {**inherited_origins, **origins}


def load_config(spec: str, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a config; `spec` is a path or a bare name like base.yaml.
    A config may start from another with `extends: base.yaml` and state only what differs.
    An error names where the value at fault came from: `file:line` (of the file in the extends
    chain that set it), or the `--set` (both when a check involves both)."""
    path = resolve_config_path(spec)
    raw, origins = _resolved_mapping(path)
    raw.setdefault("name", Path(path).stem)
    try:
        cfg = build_section(Config, raw, "")
        for assignment in overrides or []:  # their own errors name the --set
            origins[apply_override(cfg, assignment)] = f"--set {assignment.strip()}"
        validate(cfg)
    except ConfigError as e:
        raise UsageError(f"{_blame(e.keys, origins) or path}: {e}") from None
    return cfg


def _blame(keys: tuple[str, ...], origins: Origins) -> str:
    """Where the keys' values came from, e.g. "c.yaml:3, --set model.d_model=100" (an item of a
    list, train.betas[0], is blamed on its list); "" when every one is a default."""
    found = (origins.get(key.split("[")[0]) for key in keys)
    return ", ".join(dict.fromkeys(place for place in found if place))


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Rebuild a Config saved in a checkpoint or run directory."""
    cfg = build_section(Config, raw, "")
    validate(cfg)
    return cfg
