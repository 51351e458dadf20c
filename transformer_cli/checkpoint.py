"""Self-contained, self-verifying checkpoint files.

A checkpoint is one `torch.save` file holding plain data only (tensors, numbers, strings,
bytes, lists, dicts), so it loads with `torch.load(weights_only=True)`:

    format         "tfm-checkpoint/1"
    model          architecture: {"config": ModelConfig fields, "src_vocab_size", "tgt_vocab_size"}
    state_dict     the weights
    tokenizer      TokenizerPair.state(): vocabularies / SentencePiece models
    config         the resolved run config
    metrics        validation metrics of these weights
    train_state    (last.pt only) optimizer, schedule, counters, RNG states, history
    sha256         digest of everything above, checked on every load

Files are written atomically (see fsutil), so a reader never sees a partial file; the
digest also catches later damage (bit rot, a truncated copy).
"""

from __future__ import annotations

import hashlib
import pickle
import pickletools
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from .errors import TfmError, UsageError
from .fsutil import atomic_torch_save

FORMAT = "tfm-checkpoint/1"


class CheckpointError(TfmError):
    """A checkpoint file that is missing, unreadable, damaged or not a tfm checkpoint."""


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


def save_checkpoint(path: Path, payload: dict[str, Any], keep_previous: Path | None = None) -> None:
    """Write `payload` (plus format and digest) atomically to `path` (see `atomic_write`)."""
    payload = {**payload, "format": FORMAT}
    payload["sha256"] = content_digest(payload)
    atomic_torch_save(path, payload, keep_previous)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read and verify a checkpoint. Raises CheckpointError (damaged) or UsageError (unsafe)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"checkpoint not found: {path}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols; errors say enough
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if _references_callables(path):
            raise UsageError(f"refusing to load {path}: it holds Python objects that could run "
                             "code when unpickled (not a tfm checkpoint)") from None
        raise CheckpointError(f"checkpoint {path} is damaged or not a checkpoint: "
                              f"{_reason(e)}") from None
    except Exception as e:  # zip errors, truncation, EOF: torch raises many kinds
        raise CheckpointError(f"checkpoint {path} is damaged or unreadable: {_reason(e)}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a tfm checkpoint (format {FORMAT} expected)")
    if payload.get("sha256") != content_digest(payload):
        raise CheckpointError(f"checkpoint {path} is damaged: its content does not match its "
                              "stored sha256")
    return payload


def _reason(error: Exception) -> str:
    """torch's first line, unless it is the advice to load unsafely (never give that)."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
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
