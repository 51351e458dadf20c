"""Typed configuration: schema, YAML loading, `--set` overrides and validation.

A config is a YAML mapping with the sections `data`, `tokenizer`, `model`, `train`, `decode`, `serve`
(each a dataclass below) plus an optional `name`. Every problem is reported as one
`UsageError` line naming the file and the key, e.g.
``configs/x.yaml: model.n_heads=7 must divide model.d_model=256``.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import operator
import types
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from .errors import UsageError


def _bounds(ge: float | None = None, le: float | None = None, gt: float | None = None,
            lt: float | None = None) -> dict[str, float | None]:
    return {"ge": ge, "le": le, "gt": gt, "lt": lt}


def _f(default: Any, **bounds: float) -> Any:
    """A dataclass field with a default and optional numeric bounds (ge/le/gt/lt)."""
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=_bounds(**bounds))
    return field(default=default, metadata=_bounds(**bounds))


@dataclass
class SplitsConfig:
    """File stems of each split inside the source: `<stem>.<lang>` or `<stem>.<lang>.gz`."""

    train: str = "train"
    val: str = "val"
    test: str = "test_2016_flickr"


@dataclass
class DataConfig:
    corpus: Literal["multi30k", "files"] = "multi30k"
    source: str | None = None
    src_lang: str = "de"
    tgt_lang: str = "en"
    splits: SplitsConfig = field(default_factory=SplitsConfig)
    sha256: dict[str, str] = _f({})
    dir: str = "data"
    cache_dir: str = "data/cache"
    train_max_len: int = _f(100, ge=1, le=16384)
    limit_train: int | None = _f(None, ge=1)
    min_train_pairs: int = _f(100, ge=1)


@dataclass
class TokenizerConfig:
    kind: Literal["spacy", "sentencepiece"] = "sentencepiece"
    lowercase: bool = False
    min_freq: int = _f(2, ge=1)
    max_vocab: int | None = _f(None, ge=5, le=2_000_000)
    model_type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: int = _f(8000, ge=16, le=1_000_000)
    joint: bool = True
    character_coverage: float = _f(1.0, gt=0.9, le=1.0)


@dataclass
class ModelConfig:
    d_model: int = _f(256, ge=8, le=16384)
    n_heads: int = _f(8, ge=1, le=256)
    n_encoder_layers: int = _f(3, ge=1, le=128)
    n_decoder_layers: int = _f(3, ge=1, le=128)
    d_ff: int = _f(512, ge=1, le=131072)
    dropout: float = _f(0.1, ge=0.0, lt=1.0)
    attention_dropout: float = _f(0.0, ge=0.0, lt=1.0)
    activation_dropout: float = _f(0.0, ge=0.0, lt=1.0)
    activation: Literal["relu", "gelu"] = "relu"
    positional: Literal["learned", "sinusoidal"] = "sinusoidal"
    max_len: int = _f(256, ge=4, le=16384)
    norm: Literal["post", "pre"] = "post"
    tie_output: bool = False
    share_embeddings: bool = False


@dataclass
class TrainConfig:
    epochs: int = _f(10, ge=1)
    max_steps: int | None = _f(None, ge=1)
    batch_size: int | None = _f(128, ge=1, le=1_000_000)
    batch_tokens: int | None = _f(None, ge=16, le=100_000_000)
    accumulate: int = _f(1, ge=1, le=100_000)
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = _f(5e-4, gt=0.0)
    betas: list[float] = _f([0.9, 0.98])
    eps: float = _f(1e-9, gt=0.0)
    weight_decay: float = _f(0.0, ge=0.0)
    clip_norm: float | None = _f(1.0, gt=0.0)
    label_smoothing: float = _f(0.0, ge=0.0, lt=1.0)
    schedule: Literal["constant", "inverse_sqrt"] = "constant"
    warmup_steps: int = _f(0, ge=0)
    seed: int = 1234
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    compile: bool = False
    threads: int | None = _f(None, ge=1, le=4096)
    valid_every: int | None = _f(None, ge=1)
    valid_bleu: bool = False
    valid_decode: Literal["greedy", "beam"] = "greedy"
    patience: int | None = _f(None, ge=1)
    checkpoint_every_steps: int | None = _f(None, ge=1)
    checkpoint_every_minutes: float | None = _f(5.0, gt=0.0)
    average_last: int = _f(1, ge=1)
    promote: Literal["if-better", "always", "never"] = "if-better"
    promote_metric: Literal["valid_loss", "valid_bleu"] = "valid_loss"
    promote_margin_loss: float = _f(0.0, ge=0.0)
    promote_margin_bleu: float = _f(0.2, ge=0.0, le=100.0)
    promote_min_bleu: float | None = _f(None, ge=0.0, le=100.0)
    keep_published: int = _f(3, ge=1, le=100)
    out_dir: str = "checkpoints"
    tensorboard: bool = False


@dataclass
class DecodeConfig:
    beam_size: int = _f(1, ge=1, le=256)
    n_best: int = _f(1, ge=1, le=256)
    length_penalty: float = _f(1.0, ge=0.0, le=100.0)
    max_len_a: float = _f(1.5, ge=0.0, le=100.0)
    max_len_b: int = _f(10, ge=1, le=16384)
    batch_size: int = _f(128, ge=1, le=100_000)


@dataclass
class ServeConfig:
    """`tfm serve`: where it listens, how it batches, what it accepts (see serving/)."""

    host: str = "127.0.0.1"
    port: int = _f(8000, ge=0, le=65535)
    threads: int | None = _f(None, ge=1, le=1024)  # torch intra-op threads; None: half the cores
    batch_tokens: int = _f(2048, ge=1, le=1_000_000)  # source tokens per batch (one input may exceed it)
    max_wait_ms: float = _f(5.0, ge=0.0, le=10_000.0)  # how long a batch waits for company
    max_inputs: int = _f(64, ge=1, le=100_000)  # sentences per request
    max_bytes: int = _f(65536, ge=64, le=1 << 30)  # request body size
    max_beam_size: int = _f(8, ge=1, le=256)
    reload_poll_s: float = _f(2.0, ge=0.01, le=3600.0)  # how often the model file is checked
    token_env: str = "TFM_SERVE_TOKEN"  # environment variable holding the bearer token
    token_file: str | None = None  # or a file holding it (read at start)


@dataclass
class Config:
    name: str = "run"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)

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

    def fingerprint(self, *sections: str) -> str:
        """SHA-256 of the named sections (all when none), for detecting changed inputs."""
        d = self.to_dict()
        chosen = {k: d[k] for k in (sections or d.keys())}
        return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- coercion

def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Return `value` converted to type `tp`, or raise UsageError naming `key`."""
    optional, inner = _is_optional(tp)
    if optional:
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none", "~")):
            return None
        return _coerce(value, inner, key)
    if dataclasses.is_dataclass(tp):
        return build_section(tp, value, key)
    origin = get_origin(tp)
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise UsageError(f"{key} must be {_type_name(tp)} (got {value!r})")
    if origin is list:
        (item,) = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise UsageError(f"{key} must be a list (got {value!r})")
        return [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise UsageError(f"{key} must be a mapping (got {value!r})")
        return {str(k): _coerce(v, str, f"{key}.{k}") for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif tp is float:
        number = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except (ValueError, OverflowError):
                pass
        if number is not None:
            if not math.isfinite(number):
                raise UsageError(f"{key} must be a finite number (got {value!r})")
            return number
    elif tp is str:
        if isinstance(value, str):
            return value
    raise UsageError(f"{key} must be {_type_name(tp)} (got {value!r})")


_BOUND_OPS = {"ge": (operator.ge, ">="), "le": (operator.le, "<="),
              "gt": (operator.gt, ">"), "lt": (operator.lt, "<")}


def _check_bounds(value: Any, meta: Any, key: str) -> None:
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    for name, (op, sym) in _BOUND_OPS.items():
        bound = meta.get(name)
        if bound is not None and not op(value, bound):
            raise UsageError(f"{key}={value} is out of range: must be {sym} {bound}")


def _unknown_key(key: str, choices: list[str], prefix: str) -> UsageError:
    close = difflib.get_close_matches(key, choices, n=1)
    hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f" (known: {', '.join(choices)})"
    return UsageError(f"unknown key '{prefix}{key}'{hint}")


def build_section(cls: type, raw: Any, key: str) -> Any:
    """Instantiate dataclass `cls` from mapping `raw` with type and range checks."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise UsageError(f"{key or 'the config'} must be a mapping (got {raw!r})")
    hints = get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    prefix = f"{key}." if key else ""
    kwargs = {}
    for k, v in raw.items():
        if k not in known:
            raise _unknown_key(str(k), list(known), prefix)
        value = _coerce(v, hints[k], prefix + k)
        _check_bounds(value, known[k].metadata, prefix + k)
        kwargs[k] = value
    return cls(**kwargs)


# --------------------------------------------------------------------------- overrides

def apply_override(cfg: Config, assignment: str) -> None:
    """Apply one `section.key=value` override in place, with the same checks as the file."""
    if "=" not in assignment:
        raise UsageError(f"--set {assignment!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
    path, _, text = assignment.partition("=")
    parts = path.strip().split(".")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    obj: Any = cfg
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        prefix = f"{prefix}." if prefix else ""
        if not dataclasses.is_dataclass(obj):
            raise UsageError(f"--set {path}: '{prefix.rstrip('.')}' has no sub-keys")
        known = {f.name: f for f in dataclasses.fields(obj)}
        if part not in known:
            raise UsageError(f"--set {path}: " + str(_unknown_key(part, list(known), prefix)))
        if i == len(parts) - 1:
            tp = get_type_hints(type(obj))[part]
            try:
                new = _coerce(value, tp, path)
                _check_bounds(new, known[part].metadata, path)
            except UsageError as e:
                raise UsageError(f"--set {e}") from None
            setattr(obj, part, new)
        else:
            obj = getattr(obj, part)


# --------------------------------------------------------------------------- validation

def validate(cfg: Config) -> None:
    """Checks that involve more than one key."""
    m, t, tr, d = cfg.model, cfg.tokenizer, cfg.train, cfg.data
    if m.d_model % m.n_heads:
        raise UsageError(f"model.n_heads={m.n_heads} must divide model.d_model={m.d_model}")
    if m.positional == "sinusoidal" and m.d_model % 2:
        raise UsageError(f"model.d_model={m.d_model} must be even for sinusoidal positions")
    if m.share_embeddings and not (t.kind == "sentencepiece" and t.joint):
        raise UsageError("model.share_embeddings needs a joint vocabulary "
                         "(tokenizer.kind: sentencepiece with tokenizer.joint: true)")
    if tr.batch_size is None and tr.batch_tokens is None:
        raise UsageError("set train.batch_size (sentences) or train.batch_tokens (token budget)")
    if tr.batch_size is not None and tr.batch_tokens is not None:
        raise UsageError("train.batch_size and train.batch_tokens are exclusive: set one to null")
    if len(tr.betas) != 2 or not all(0.0 <= b < 1.0 for b in tr.betas):
        raise UsageError(f"train.betas must be two numbers in [0, 1) (got {tr.betas})")
    if tr.schedule == "inverse_sqrt" and tr.warmup_steps < 1:
        raise UsageError("train.schedule: inverse_sqrt needs train.warmup_steps >= 1")
    if cfg.decode.n_best > cfg.decode.beam_size:
        raise UsageError(f"decode.n_best={cfg.decode.n_best} must be <= "
                         f"decode.beam_size={cfg.decode.beam_size}")
    if d.src_lang == d.tgt_lang:
        raise UsageError(f"data.src_lang and data.tgt_lang are both '{d.src_lang}'")
    if m.positional == "learned" and m.max_len < d.train_max_len + 2:
        raise UsageError(f"model.max_len={m.max_len} must be >= data.train_max_len + 2 "
                         f"= {d.train_max_len + 2} with learned positions")
    if not cfg.name or "/" in cfg.name or cfg.name.startswith("."):
        raise UsageError(f"name={cfg.name!r} must be a plain directory name")


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


def resolve_config_path(spec: str) -> Path:
    """Find a config: the path as given, then ./configs/, then the copies shipped with tfm."""
    names = [spec] if spec.endswith((".yaml", ".yml")) else [spec, spec + ".yaml"]
    for name in names:
        for candidate in (Path(name), Path("configs") / name):
            if candidate.is_file():
                return candidate
        shipped = packaged_configs().get(Path(name).name)
        if shipped is not None and Path(name).name == name:
            return shipped
    shipped_names = ", ".join(sorted(packaged_configs()))
    raise UsageError(f"config file not found: {spec!r} (looked in ., ./configs and the "
                     f"configs shipped with tfm: {shipped_names})")


def load_config(spec: str, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a config; `spec` is a path or a bare name like base.yaml."""
    path = resolve_config_path(spec)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
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
    raw.setdefault("name", Path(path).stem)
    try:
        cfg = build_section(Config, raw, "")
    except UsageError as e:
        raise UsageError(f"{path}: {e}") from None
    for assignment in overrides or []:
        apply_override(cfg, assignment)  # its errors name the --set, not the file
    try:
        validate(cfg)
    except UsageError as e:
        raise UsageError(f"{path}: {e}") from None
    return cfg


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Rebuild a Config saved in a checkpoint or run directory."""
    cfg = build_section(Config, raw, "")
    validate(cfg)
    return cfg
