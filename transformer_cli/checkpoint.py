"""Checkpoints: one typed object, `Checkpoint`, in a self-verifying file.

A checkpoint file is one `torch.save` of plain data only (tensors, numbers, strings, bytes,
lists, dicts), so it loads with `torch.load(weights_only=True)`. Version 2:

    format            "tfm-checkpoint/2"
    model             {"architecture", "src_vocab_size", "tgt_vocab_size"}: what to build; the
                      model's settings are the run config's "model" section (stored once)
    state_dict        the weights
    tokenizer         TokenizerPair.state(): vocabularies / SentencePiece models
    config            the resolved run config
    metrics           validation metrics of these weights
    data_fingerprint, run_identity, created
    parent            the model the run started from (train.init_from): {"from", "path", "sha256"}
    training          what the model was trained on: {"train_pairs", "continued_runs"} (and
                      "retrain", train.retrain's decision), for the next night's policy
    train_state       (last.pt only) `TrainState`
    sha256            digest of everything above, checked on every read

`read_payload`/`write_payload` are the file: atomic writes (see fsutil), so a reader never
sees a partial file, and the digest, which catches later damage (bit rot, a truncated copy).
`Checkpoint.from_payload` is the one place that reads older versions: version 1 stored the
model's settings a second time inside "model", and files written before the architecture name
or the world size were recorded lack them.
"""

from __future__ import annotations

import hashlib
import pickle
import pickletools
import struct
import warnings
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from .errors import TfmError, UsageError, first_line
from .fsutil import atomic_torch_save

FORMAT_PREFIX = "tfm-checkpoint/"
VERSION = 2
FORMAT = f"{FORMAT_PREFIX}{VERSION}"
# Version 1 files written before the architecture name was recorded hold this one.
V1_ARCHITECTURE = "transformer"


class CheckpointError(TfmError):
    """A checkpoint file that is missing, unreadable, damaged or not a tfm checkpoint."""

    @classmethod
    def unfit(cls, path: Path | None, error: Exception) -> CheckpointError:
        """A verified file whose content this tfm cannot use (`error` says which part)."""
        where = f"{path}: " if path is not None else ""
        reason = f"missing {error}" if isinstance(error, KeyError) else str(error)
        return cls(f"{where}checkpoint does not fit this version of tfm: {reason}")


@dataclass(frozen=True)
class ModelDescription:
    """What to build: the architecture, its `model:` settings, the vocabulary sizes."""

    architecture: str
    config: dict[str, Any]
    src_vocab_size: int
    tgt_vocab_size: int


def _feed(h: hashlib._Hash, obj: Any) -> None:
    """Hash nested plain data deterministically (type tags keep 1 and "1" apart)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, dict):
        h.update(b"D%d" % len(obj))
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(b"L%d" % len(obj))
        for item in obj:
            _feed(h, item)
    elif isinstance(obj, bytes):
        h.update(b"B%d" % len(obj) + obj)
    elif isinstance(obj, bool) or obj is None:
        h.update(f"K{obj}".encode())
    elif isinstance(obj, int):
        h.update(f"I{obj}".encode())
    elif isinstance(obj, float):
        h.update(b"F" + struct.pack("<d", obj))
    elif isinstance(obj, str):
        data = obj.encode("utf-8")
        h.update(b"S%d" % len(data) + data)
    else:
        raise TypeError(f"checkpoint content must be plain data, not {type(obj).__name__}")


def content_digest(payload: dict[str, Any]) -> str:
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in payload.items() if k != "sha256"})
    return h.hexdigest()


def write_payload(path: Path, payload: dict[str, Any], keep_previous: Path | None = None) -> str:
    """Write `payload` (plus format and digest) atomically to `path` (see `atomic_write`);
    returns the digest."""
    payload = {**payload, "format": FORMAT}
    digest = payload["sha256"] = content_digest(payload)
    atomic_torch_save(path, payload, keep_previous)
    return digest


def _version(payload: Any) -> int | None:
    """The format version a loaded file declares, or None when it is not a tfm checkpoint."""
    declared = payload.get("format") if isinstance(payload, dict) else None
    if not isinstance(declared, str) or not declared.startswith(FORMAT_PREFIX):
        return None
    number = declared[len(FORMAT_PREFIX) :]
    return int(number) if number.isdigit() else None


def read_payload(path: Path) -> dict[str, Any]:
    """Read and verify a checkpoint file as plain data (any version up to VERSION). Raises
    CheckpointError (damaged, or of a newer tfm) or UsageError (missing, or unsafe)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"checkpoint not found: {path}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols; errors say enough
            warnings.simplefilter("ignore")
            payload: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if _references_callables(path):
            raise UsageError(
                f"refusing to load {path}: it holds Python objects that could run "
                "code when unpickled (not a tfm checkpoint)"
            ) from None
        raise CheckpointError(f"checkpoint {path} is damaged or not a checkpoint: {_reason(e)}") from None
    except Exception as e:  # zip errors, truncation, EOF: torch raises many kinds
        raise CheckpointError(f"checkpoint {path} is damaged or unreadable: {_reason(e)}") from None
    version = _version(payload)
    if version is None:
        raise CheckpointError(f"{path} is not a tfm checkpoint (format {FORMAT} expected)")
    if version > VERSION:
        raise CheckpointError(
            f"{path} was written by a newer tfm (format {payload['format']}; "
            f"this one reads up to {FORMAT}): upgrade tfm to use it"
        )
    if payload.get("sha256") != content_digest(payload):
        raise CheckpointError(f"checkpoint {path} is damaged: its content does not match its stored sha256")
    return payload


def _reason(error: Exception) -> str:
    """torch's first line, unless it is the advice to load unsafely (never give that)."""
    first = first_line(error)
    if "weights_only" in first or "Weights only" in first:
        return "its bytes are not a torch checkpoint"
    return first


_CALLABLE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX"}


def _references_callables(path: Path) -> bool:
    """Whether a file torch's safe loader refused is a well-formed pickle that names callables
    (an attempt to run code) rather than random or damaged bytes."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                name = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
                data = z.read(name) if name else b""
        else:
            data = path.read_bytes()
        return any(op.name in _CALLABLE_OPCODES for op, _, _ in pickletools.genops(data))
    except Exception:  # not a parseable pickle stream
        return False


@dataclass
class TrainState:
    """What last.pt adds to a model: everything that continues the run exactly."""

    progress: dict[str, Any]  # training.progress.Progress as plain data
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: list[Any]  # every rank's RNG states, in rank order
    world_size: int  # training processes that wrote it
    grad_scaler: dict[str, Any] | None = None  # fp16 only

    def to_payload(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.grad_scaler is None:
            del out["grad_scaler"]
        return out

    @classmethod
    def from_payload(cls, state: dict[str, Any]) -> TrainState:
        # The world size was not recorded at first; every rank's RNG state always was.
        return cls(
            state["progress"],
            state["optimizer"],
            state["scheduler"],
            state["rng"],
            int(state.get("world_size", len(state["rng"]))),
            state.get("grad_scaler"),
        )


@dataclass
class Checkpoint:
    """A model with what it needs to translate (tokenizer, config), where it came from, and
    for last.pt the state that resumes its training. `Checkpoint.read` verifies the file."""

    architecture: str  # the name model.builders builds it under
    src_vocab_size: int
    tgt_vocab_size: int
    weights: dict[str, torch.Tensor]
    tokenizer: dict[str, Any]  # TokenizerPair.state()
    config: dict[str, Any]  # the resolved run config; "model" holds the model's settings
    metrics: dict[str, Any] = field(default_factory=dict)
    data_fingerprint: str | None = None
    run_identity: str | None = None  # training.run_dir.run_identity of the run that wrote it
    created: str | None = None  # ISO time, UTC
    train_state: TrainState | None = None
    sha256: str | None = None  # the content digest, once written or read
    parent: dict[str, Any] | None = None  # training.parent.Parent.record of a continued run
    # training.retrain_policy.training_record: train_pairs, continued_runs (since a run from scratch)
    training: dict[str, Any] | None = None

    @property
    def digest(self) -> str:
        """`sha256` of a checkpoint that was written or read (which every caller of this has)."""
        if self.sha256 is None:
            raise ValueError("a checkpoint has its digest once it is written or read")
        return self.sha256

    @property
    def model_config(self) -> dict[str, Any]:
        model: dict[str, Any] = self.config["model"]
        return model

    def model_description(self) -> ModelDescription:
        """What to build, with the model's settings (as export manifests record it)."""
        return ModelDescription(self.architecture, self.model_config, self.src_vocab_size, self.tgt_vocab_size)

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": {
                "architecture": self.architecture,
                "src_vocab_size": self.src_vocab_size,
                "tgt_vocab_size": self.tgt_vocab_size,
            },
            "state_dict": self.weights,
            "tokenizer": self.tokenizer,
            "config": self.config,
            "metrics": self.metrics,
        }
        for key in ("data_fingerprint", "run_identity", "created", "parent", "training"):
            if getattr(self, key) is not None:
                payload[key] = getattr(self, key)
        if self.train_state is not None:
            payload["train_state"] = self.train_state.to_payload()
        return payload

    @classmethod
    def from_payload(cls, payload: dict[str, Any], path: Path | None = None) -> Checkpoint:
        """From a verified file's content, of any version. Raises CheckpointError (naming
        `path`) when the content does not fit this version of tfm."""
        try:
            model, config = payload["model"], payload["config"]
            if not isinstance(config, dict):
                raise TypeError(f"its config is a {type(config).__name__}, not a mapping")
            if "config" in model:  # version 1: the model's settings were stored here as well
                config = {**config, "model": model["config"]}
            state = payload.get("train_state")
            return cls(
                model.get("architecture", V1_ARCHITECTURE),
                int(model["src_vocab_size"]),
                int(model["tgt_vocab_size"]),
                payload["state_dict"],
                payload["tokenizer"],
                config,
                payload.get("metrics") or {},
                payload.get("data_fingerprint"),
                payload.get("run_identity"),
                payload.get("created"),
                None if state is None else TrainState.from_payload(state),
                payload.get("sha256"),
                payload.get("parent"),
                payload.get("training"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError.unfit(path, e) from None

    @classmethod
    def read(cls, path: Path) -> Checkpoint:
        """Read and verify `path` (see `read_payload` for its errors)."""
        return cls.from_payload(read_payload(path), path)

    def write(self, path: Path, keep_previous: Path | None = None) -> None:
        """Write atomically (see `write_payload`); sets `sha256`."""
        self.sha256 = write_payload(path, self.to_payload(), keep_previous)
