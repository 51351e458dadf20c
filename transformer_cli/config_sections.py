"""The sections of the schema that config.py does not keep in modules of their own (data,
tokenizer, decode, serve, export; model: config_model.py): each a dataclass, every field with its help,
bounds and resumability. `Config` (config.py) puts them together with config_train.py's,
config_synthetic.py's and config_corrections.py's; the checks across keys (config_checks.py)
read them without `Config` itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .config_values import Moved, Section, build_section
from .config_values import schema_field as _f
from .config_values import schema_section as _section


@dataclass
class SplitsConfig(Section):
    """File stems of each split inside the source: `<stem>.<lang>` or `<stem>.<lang>.gz`."""

    SECTION: ClassVar[str] = "data.splits"

    train: str = _f("train", "File stem of the training split.")
    val: str = _f("val", "File stem of the validation split (model selection, early stopping).")
    test: str = _f("test_2016_flickr", "File stem of the test split (`tfm evaluate --split test`).")


@dataclass
class DataConfig(Section):
    """Where the parallel corpus comes from and which pairs are trained on."""

    SECTION: ClassVar[str] = "data"

    corpus: str = _f(
        "multi30k",
        "multi30k: Multi30k task 1 with built-in checksums; files: your own "
        "corpus; or one a plugin registers (seams.CORPORA).",
    )
    corpus_options: dict[str, Any] = _f(
        {}, "The corpus's own settings, for a corpus that has them (a plugin's).", added=True
    )
    source: str | None = _f(
        None,
        "Folder or URL holding the corpus files (else $TFM_DATA_SOURCE, "
        "else the source the last preprocess recorded, else Multi30k's URL).",
    )
    src_lang: str = _f("de", "Source language code (the file suffix).")
    tgt_lang: str = _f("en", "Target language code (the file suffix).")
    splits: SplitsConfig = _section(SplitsConfig, "File stems of the splits.")
    sha256: dict[str, str] = _f({}, "Expected SHA-256 per file name, e.g. {train.de.gz: ...}.")
    dir: str = _f("data", "Where preprocessed data goes (<dir>/<name>/).")
    cache_dir: str = _f("data/cache", "Where downloads are cached.")
    train_max_len: int = _f(100, "Training pairs with a side longer than this many tokens are dropped.", ge=1, le=16384)
    limit_train: int | None = _f(None, "Keep only the first N training pairs (smoke tests).", ge=1)
    min_train_pairs: int = _f(100, "Fewer training pairs than this after filtering is an error.", ge=1)
    shard_tokens: int = _f(
        100_000_000,
        "Token ids (both sides) per file of the preprocessed, memory-mapped splits: no file grows with the corpus.",
        ge=1000,
    )


@dataclass
class TokenizerConfig(Section):
    """How text becomes token ids (fitted on the training split only)."""

    SECTION: ClassVar[str] = "tokenizer"

    kind: str = _f(
        "sentencepiece",
        "spacy: rule-based words (spacy.blank); sentencepiece: learned "
        "subwords; or a kind a plugin registers (seams.TOKENIZERS).",
    )
    options: dict[str, Any] = _f({}, "The kind's own settings, for a kind that has them (a plugin's).", added=True)
    lowercase: bool = _f(False, "Lowercase all text (output is lowercase; BLEU is then case-insensitive).")
    min_freq: int = _f(2, "spacy: words seen fewer times become <unk>.", ge=1)
    max_vocab: int | None = _f(None, "spacy: keep at most this many words per language.", ge=5, le=2_000_000)
    model_type: Literal["bpe", "unigram"] = _f("bpe", "sentencepiece: the subword algorithm.")
    vocab_size: int = _f(8000, "sentencepiece: vocabulary size (per side, or shared when joint).", ge=16, le=1_000_000)
    joint: bool = _f(True, "sentencepiece: one vocabulary for both languages (needed by model.share_embeddings).")
    character_coverage: float = _f(1.0, "sentencepiece: share of characters covered by the vocabulary.", gt=0.9, le=1.0)
    fit_sample: int = _f(
        1_000_000,
        "sentencepiece: fitted on a random sample of at most this many "
        "training pairs (the same sample every time; all pairs when fewer), which "
        "bounds preprocessing's memory.",
        ge=100,
    )
    sampling: float = _f(
        0.0,
        "sentencepiece: subword regularization of the training split, "
        "re-sampled for every batch: BPE-dropout probability (bpe) or sampling "
        "smoothing alpha (unigram); 0: off. The draws are SentencePiece's and do "
        "not repeat across processes (a resumed run draws anew). Evaluation is "
        "always deterministic.",
        ge=0.0,
        lt=1.0,
    )


@dataclass
class DecodeConfig(Section):
    """Translation by `tfm translate`, `tfm evaluate` and the Python API."""

    SECTION: ClassVar[str] = "decode"
    MOVED: ClassVar[dict[str, Moved]] = {  # read, with a warning, until removed
        "sampling_topk": Moved("strategy_options.topk", 0),
        "sampling_temperature": Moved("strategy_options.temperature", 1.0),
        "sampling_seed": Moved("strategy_options.seed", None),
    }

    beam_size: int = _f(1, "1: greedy search; more: beam search.", ge=1, le=256)
    n_best: int = _f(1, "Hypotheses returned per input (<= beam_size).", ge=1, le=256)
    length_penalty: float = _f(1.0, "Beam scores are divided by length^penalty (0: none).", ge=0.0, le=100.0)
    max_len_a: float = _f(1.5, "Longest output: max_len_a * source length + max_len_b tokens.", ge=0.0, le=100.0)
    max_len_b: int = _f(10, "See max_len_a.", ge=1, le=16384)
    batch_size: int = _f(128, "Sentences decoded together.", ge=1, le=100_000)
    strategy: str = _f(
        "auto",
        "The search (seams.SEARCH_STRATEGIES): auto (greedy for beam_size 1, "
        "else beam), greedy, beam, sample, or one registered by a plugin.",
    )
    strategy_options: dict[str, Any] = _f({}, "The strategy's own settings (sample: topk, temperature, seed).")
    recase: bool = _f(
        True,
        "Give sources typed all lowercase or all in capitals the casing of "
        "the training sources before translating (each word's most frequent "
        "spelling); sources with any casing are left as typed.",
    )
    ensemble: list[str] = _f(
        [],
        "Models that translate together by default (translate, evaluate "
        "and serve without --checkpoint): checkpoint files or Hugging Face "
        "folders with the same vocabularies, one beam over their combined "
        "predictions; empty: the run's published model alone.",
    )
    ensemble_weights: list[float] | None = _f(None, "One weight per ensemble model (null: equal).")
    ensemble_combine: Literal["log", "prob"] = _f(
        "log",
        "How an ensemble combines its models' next-token distributions: log (the weighted "
        "mean of their log-probabilities) or prob (of their probabilities).",
    )
    glossary: str | None = _f(
        None,
        "A TSV file of terms (source term, tab, target term) that translations use: a term a "
        "translation misses is decoded again with it as a constraint, and one that cannot be "
        "placed is reported (docs/terms.md).",
        added=True,
    )
    glossary_store: str | None = _f(
        None,
        "A corrections store folder whose accepted terms (tfm feedback add --terms, POST /terms) "
        "translations use as decode.glossary's, over that file's (docs/terms.md). null: tfm "
        "translate -c and tfm serve -c use the config's corrections.store.",
        added=True,
    )


def saved_decode(values: dict[str, Any]) -> DecodeConfig:
    """The decoding defaults saved with a model (its checkpoint's or export's config), less the
    glossary: decode.glossary and decode.glossary_store are the deployment's (the config that
    translates or serves names them), and a path saved with a model need not exist where the
    model is loaded."""
    deployment = ("glossary", "glossary_store")
    decode: DecodeConfig = build_section(
        DecodeConfig, {k: v for k, v in values.items() if k not in deployment}, "decode"
    )
    return decode


@dataclass
class ServeConfig(Section):
    """`tfm serve`: where it listens, how it batches, what it accepts (see serving/)."""

    SECTION: ClassVar[str] = "serve"

    host: str = _f("127.0.0.1", "Address to listen on (also --host).")
    port: int = _f(8000, "Port (also --port; 0: any free port).", ge=0, le=65535)
    threads: int | None = _f(
        None, "torch intra-op threads (null: half the cores, leaving the rest to a nightly retrain).", ge=1, le=1024
    )
    batch_tokens: int = _f(2048, "Source tokens per batch (one input may exceed it).", ge=1, le=1_000_000)
    max_wait_ms: float = _f(
        20.0,
        "Longest wait of a batch for the clients it just answered to send again (a lone client never waits).",
        ge=0.0,
        le=10_000.0,
    )
    max_inputs: int = _f(64, "Sentences per request (more: 413).", ge=1, le=100_000)
    max_bytes: int = _f(65536, "Request body size in bytes (more: 413).", ge=64, le=1 << 30)
    max_beam_size: int = _f(8, "Largest beam_size a request may ask for.", ge=1, le=256)
    max_pending_s: float | None = _f(
        1.0,
        "Load shedding: the seconds an admitted request may "
        "wait for its answer from when the server began to read it, predicted from the recent batches' "
        "times with a margin for how far recent predictions fell short "
        "(the first requests' from a warm-up batch timed before the server listens); a "
        "request that would wait longer, or make an earlier one "
        "late, is answered 503 with Retry-After at once (counted in "
        "/metrics: tfm_requests_shed_total). null: no bound.",
        ge=0.001,
        le=3600.0,
    )
    attention_slots: int = _f(
        1,
        "POST /attention requests (a diagnostic: one sentence's cross-attention) answered at "
        "once; one more is answered 503 at once. They are bounded here, apart from "
        "max_pending_s, so that a flood of them never takes the place of translations.",
        ge=1,
        le=1024,
        added=True,
    )
    reload_poll_s: float = _f(2.0, "How often the model file is checked for a new version.", ge=0.01, le=3600.0)
    body_timeout_s: float = _f(
        30.0, "Seconds a client has to send a whole request body, from its headers on (slower: 408).", ge=0.1, le=3600.0
    )
    shutdown_grace_s: float = _f(
        30.0,
        "On SIGTERM, seconds the requests in flight get to finish; then they are answered 503 and the server exits.",
        ge=0.0,
        le=3600.0,
    )
    token_env: str = _f("TFM_SERVE_TOKEN", "Environment variable holding the bearer token.")
    token_file: str | None = _f(None, "Or a file holding it (read at start).")


@dataclass
class ExportConfig(Section):
    """`tfm export`: the format it writes and that format's own settings."""

    SECTION: ClassVar[str] = "export"

    format: str = _f(
        "ctranslate2",
        "What tfm export writes (also --format): ctranslate2 (a "
        "CTranslate2 model tfm runs), hf (a MarianMT folder for transformers), or a "
        "format a plugin registers (seams.EXPORTERS).",
    )
    options: dict[str, Any] = _f(
        {},
        "The format's own settings (ctranslate2: quantization, also "
        "--quantization: none, int8, int8_float32, int16, float16, "
        "int8_float16, bfloat16, int8_bfloat16).",
    )
