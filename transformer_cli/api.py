"""The Python API: `tfm.load(path_or_config)` gives a `Translator` that translates lists of lines.

    import transformer_cli as tfm
    model = tfm.load("base.yaml")                      # the run's published model, as `tfm translate` picks it
    model.translate(["Ein Mann fährt Fahrrad."])       # one string per line
    model.translate(lines, beam_size=5, n_best=3)      # [[best, second, third], ...]
    model.sha256, model.config_name, model.metrics     # what is loaded

`tfm translate` and `tfm serve` use the same object. `open_backend` is the one place where a
model file becomes the engine that runs it; either backend of the interface
`inference.translate.TranslationBackend` (torch's `TorchTranslator` for a checkpoint, CTranslate2's
`Ct2Translator` for an export) fits behind a `Translator`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from .config import DecodeConfig
from .config_train import DEVICES, PRECISIONS
from .contracts.engine import Engine
from .errors import UsageError, check_choice
from .host.cpu_load import free_cpus
from .host.threads import AUTO, Setting, ThreadTuner, parse_setting
from .inference.outputs import Output, Sources
from .model_source import resolve_model, resolve_models

# How long threads="auto" watches the CPUs before decoding starts (less than training's
# 0.3 s: a `tfm translate` of one line waits for it).
DECODE_WATCH_S = 0.1

if TYPE_CHECKING:  # imported when used: `import transformer_cli` does not import torch
    from .corrections.store import Correction
    from .inference.translate import TranslationBackend


@dataclass
class Attention:
    translation: str
    source_tokens: list[str]
    target_tokens: list[str]
    weights: list[list[float]]  # [len(target_tokens), len(source_tokens)], rows sum to 1


ModelPaths = Path | Sequence[Path]  # one model, or several that decode as an ensemble


def model_paths(paths: ModelPaths) -> list[Path]:
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def open_backend(
    path: ModelPaths,
    device: str = "auto",
    precision: str = "fp32",
    decode: DecodeConfig | None = None,
    threads: Setting = None,
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str | None = None,
) -> TranslationBackend:
    """Open the model at `path` on `device` (`config.DEVICES`) in `precision`
    (`config.PRECISIONS`); `decode` replaces the decoding defaults stored with the model.
    Several paths decode as one ensemble (inference/ensemble.py) with `ensemble_weights` and
    `ensemble_combine` (default: `decode`'s, else the first model's decode settings).

    A tfm checkpoint, or a Hugging Face MarianMT folder (model_io.read_model), runs on torch;
    the file is verified (sha256, weights_only) on the way in. A `tfm export` folder for
    CTranslate2 (recognised by its manifest) runs on CTranslate2 at the precision it was
    exported with; its files are verified against the manifest's sha256s.

    `threads`: CPU threads for decoding: torch's intra-op threads (`torch.set_num_threads`,
    process-wide) for a checkpoint, CTranslate2's intra-op threads (this model's) for an
    export. None: torch's current number (`torch.get_num_threads()`), so whatever the caller
    set for torch holds for either engine. "auto" (`tfm translate` and `tfm evaluate`): torch's
    threads start at as many of the CPUs this process may use as other work left free over
    DECODE_WATCH_S seconds (at least 1) and are re-chosen from each batch's measured speed
    (threads.ThreadTuner, process-wide; on the CPU), an export takes every such CPU; where
    OMP_NUM_THREADS is set, "auto" is None (that number holds).
    """
    check_choice("precision", precision, PRECISIONS)
    check_choice("device", device, DEVICES)
    threads = parse_setting(threads, "threads")
    if threads == AUTO and "OMP_NUM_THREADS" in os.environ:
        threads = None  # fixed by the environment: torch's number, which OpenMP's variable set
    from .export_manifest import export_engine
    from .seams import ENGINES

    paths = model_paths(path)
    if len(paths) > 1:
        return _tuned(
            _open_ensemble(paths, device, precision, decode, _fixed(threads), ensemble_weights, ensemble_combine),
            threads,
        )
    engine = export_engine(paths[0]) or "torch"
    found = ENGINES.find(engine)
    if found is None:
        raise UsageError(
            f"{paths[0]}: {ENGINES.unknown(engine)} (an export of a plugin's format: "
            "name the plugin in the config's plugins:, or install it)"
        )
    backend: TranslationBackend = found.open(Path(paths[0]), device, precision, decode, threads)
    return backend


def open_torch(
    path: Path, device: str, precision: str, decode: DecodeConfig | None, threads: Setting
) -> TranslationBackend:
    """seams.ENGINES' torch: a tfm checkpoint or a Hugging Face folder (model_io.read_model)
    decoded by `TorchTranslator` (arguments: `open_backend`'s, `threads` parsed)."""
    import torch

    from .host.device import autocast_dtype, resolve_device
    from .inference.translate import TorchTranslator
    from .model_io import read_model

    if isinstance(threads, int):
        torch.set_num_threads(threads)
    dev = resolve_device(device)
    checkpoint, where = read_model(path)
    return _tuned(TorchTranslator.load(checkpoint, dev, decode, autocast_dtype(dev, precision), where), threads)


def _read_hf_folder(folder: Path) -> Any:
    """An export of `tfm export --format hf` read back as a tfm Checkpoint (hf/folder.py)."""
    from .hf.folder import read_folder

    return read_folder(folder)


TORCH = Engine(open_torch)  # seams.ENGINES' torch: a checkpoint, a Hugging Face folder or hub id
TRANSFORMERS = Engine(open_torch, _read_hf_folder)  # tfm export --format hf: its weights read back


def _fixed(threads: Setting) -> int | None:
    return threads if isinstance(threads, int) else None


def _tuned(backend: TranslationBackend, threads: Setting) -> TranslationBackend:
    """`backend` with its torch threads tuned per batch when `threads` is "auto" (on the CPU)."""
    if threads == AUTO and backend.tunes_threads:
        backend.threads = ThreadTuner.from_load("decode threads", "tokens", watch=lambda: free_cpus(DECODE_WATCH_S))
    return backend


def _open_ensemble(
    paths: list[Path],
    device: str,
    precision: str,
    decode: DecodeConfig | None,
    threads: int | None,
    weights: Sequence[float] | None,
    combine: str | None,
) -> TranslationBackend:
    """Torch models (checkpoints, Hugging Face folders) decoding together, their vocabularies
    checked to be the same; decoding defaults: `decode`, else the first model's."""
    import hashlib

    import torch

    from .host.device import autocast_dtype, resolve_device
    from .inference.ensemble import Ensemble, check_same_vocabularies
    from .inference.translate import EnsembleMember, TorchTranslator, config_languages, model_from_checkpoint
    from .model_io import read_model, unread_exports

    exports = [f"{p} (an export for the {e} engine)" for p, e in unread_exports(paths).items()]
    if exports:  # only models that read as checkpoints (model_io) decode together
        raise UsageError(f"ensembles decode checkpoints only: give the checkpoints of {', '.join(exports)} instead")
    if threads is not None:
        torch.set_num_threads(threads)
    dev = resolve_device(device)
    read = [read_model(p) for p in paths]
    built = [model_from_checkpoint(checkpoint, where) for checkpoint, where in read]
    check_same_vocabularies([tokenizers for _, tokenizers in built], [str(p) for p in paths])
    first = TorchTranslator.load(read[0][0], dev, decode, autocast_dtype(dev, precision), read[0][1])
    d = first.decode
    ensemble = Ensemble(
        [model.eval() for model, _ in built],
        d.ensemble_weights if weights is None else weights,
        combine or d.ensemble_combine,
    )
    members = [EnsembleMember(str(p), c.digest, config_languages(c.config)) for p, (c, _) in zip(paths, read)]
    digest = hashlib.sha256(" ".join(m.sha256 for m in members).encode()).hexdigest()
    metadata = dataclasses.replace(
        first.metadata,
        sha256=digest,
        members=members,
        ensemble_weights=ensemble.weights.tolist(),
        ensemble_combine=ensemble.combine,
    )
    return TorchTranslator(ensemble, first.tokenizers, dev, d, first.dtype, metadata)


def load(
    path_or_config: str | Path | Sequence[str | Path],
    device: str = "auto",
    precision: str = "fp32",
    threads: Setting = None,
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str | None = None,
) -> Translator:
    """Load a model for translating: a checkpoint file, an export folder, a Hugging Face
    folder, or a config (name or file) whose run's published model (else best.pt, or the
    models of its decode.ensemble) is used, as `tfm translate` chooses; which of them it is,
    `resolve_model` tells by content (`threads`: see open_backend). A list of models decodes
    as one ensemble, weighted by `ensemble_weights` and combined by `ensemble_combine`
    ("log" or "prob"; see inference/ensemble.py)."""
    if isinstance(path_or_config, (str, Path)):
        paths = resolve_models(path_or_config)
    else:
        paths = [resolve_model(p) for p in path_or_config]
    return open_translator(paths, device, precision, threads, ensemble_weights, ensemble_combine)


def open_translator(
    path: ModelPaths,
    device: str = "auto",
    precision: str = "fp32",
    threads: Setting = None,
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str | None = None,
) -> Translator:
    """The model file(s) at `path` (see `open_backend`) as a `Translator`."""
    return Translator(
        open_backend(
            path,
            device,
            precision,
            threads=threads,
            ensemble_weights=ensemble_weights,
            ensemble_combine=ensemble_combine,
        ),
        path,
    )


def decode_bounds(field: str) -> tuple[Any, Any]:
    """The lowest and highest value a config file may give DecodeConfig.`field`."""
    f = next(f for f in dataclasses.fields(DecodeConfig) if f.name == field)
    return f.metadata["ge"], f.metadata["le"]


def decode_option(name: str, value: Any, field: str) -> Any:
    """`value` for DecodeConfig.`field`, refused (a UsageError naming it `name`) unless it has
    the field's type and lies within the bounds a config file has for it: every entry point
    (the Python API, `tfm translate`, a config) then accepts the same values."""
    kind = get_type_hints(DecodeConfig)[field]
    low, high = decode_bounds(field)
    types = (int, float) if kind is float else int
    if not isinstance(value, types) or isinstance(value, bool) or not low <= value <= high:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"{name} must be {what} >= {low} and <= {high} (got {value!r})")
    return kind(value)


class Translator:
    """What `tfm.load` gives: a model file opened for translating, with what it was loaded from
    (path, sha256, config name, metrics). It checks every argument, then hands the work to its
    `backend`. One call at a time (like a torch module), with one exception: `encode`, which
    only tokenizes (under the backend's own lock), may run on another thread beside a
    translation (the server tokenizes requests while a batch decodes); two translations may
    not run at once. It owns its network and keeps it in eval mode."""

    def __init__(self, backend: TranslationBackend, path: ModelPaths):
        self.backend = backend
        self.paths = model_paths(path)  # several: an ensemble's models
        self.path = self.paths[0]
        self.loaded_at = datetime.now(timezone.utc)

    @property
    def sha256(self) -> str:
        return self.backend.metadata.sha256

    @property
    def config_name(self) -> str:
        return str(self.backend.metadata.config.get("name", ""))

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.backend.metadata.metrics)

    @property
    def languages(self) -> tuple[str, str] | None:
        """(source, target) language codes of the model's data, when it says (None: unknown)."""
        return self.backend.metadata.languages

    @property
    def max_src_len(self) -> int:
        return self.backend.max_src_len

    def info(self) -> dict[str, str]:
        return {
            "path": ", ".join(map(str, self.paths)),
            "sha256": self.sha256,
            "config": self.config_name,
            "loaded_at": self.loaded_at.isoformat(timespec="seconds"),
        }

    def options(
        self,
        beam_size: int | None = None,
        n_best: int = 1,
        max_output_len: int | None = None,
        length_penalty: float | None = None,
        batch_size: int | None = None,
        recase: bool | None = None,
    ) -> DecodeConfig:
        """The model's decoding defaults with these changes; the beam widens to `n_best`.
        `max_output_len` caps every output at that many tokens (default: 1.5 x source + 10);
        `recase` switches the source truecaser (decode.recase) on or off."""
        d = dataclasses.replace(self.backend.decode)
        d.n_best = decode_option("n_best", n_best, "n_best")
        d.beam_size = max(
            decode_option("beam_size", beam_size, "beam_size") if beam_size is not None else d.beam_size, d.n_best
        )
        if max_output_len is not None:
            d.max_len_a, d.max_len_b = 0.0, decode_option("max_output_len", max_output_len, "max_len_b")
        if length_penalty is not None:
            d.length_penalty = decode_option("length_penalty", length_penalty, "length_penalty")
        if batch_size is not None:
            d.batch_size = decode_option("batch_size", batch_size, "batch_size")
        if recase is not None:
            if not isinstance(recase, bool):
                raise UsageError(f"recase must be true or false (got {recase!r})")
            d.recase = recase
        return d

    def translate(
        self, lines: list[str], beam_size: int | None = None, n_best: int = 1, max_output_len: int | None = None
    ) -> list[str] | list[list[str]]:
        """The best translation of each line, or its `n_best` best (a list per line) when
        n_best > 1. Inputs longer than the model's limit are truncated (see `translate_n_best`)."""
        out = self._translate(list(_checked_lines("translate", lines)), self.options(beam_size, n_best, max_output_len))
        if n_best == 1:
            return [hyps[0].text for hyps in out.translations]
        return [[h.text for h in hyps] for hyps in out.translations]

    def translate_n_best(self, lines: list[str], options: DecodeConfig | None = None) -> Output:
        """Translations with tokens and scores, and which inputs were truncated."""
        return self._translate(list(_checked_lines("translate_n_best", lines)), options)

    def _translate(self, lines: list[str], options: DecodeConfig | None) -> Output:
        return self.backend.translate(lines, options)

    def translate_stream(
        self, lines: Iterable[str], options: DecodeConfig | None = None, chunk_lines: int = 2000
    ) -> Iterator[tuple[list[str], Output]]:
        """Translate an iterable of lines in chunks, in order, without holding it all in memory.
        Yields (chunk of input lines, its Output); truncation indices count within the chunk."""
        chunk: list[str] = []
        for line in _checked_lines("translate_stream", lines):
            chunk.append(line)
            if len(chunk) >= chunk_lines:
                yield chunk, self._translate(chunk, options)
                chunk = []
        if chunk:
            yield chunk, self._translate(chunk, options)

    def encode(self, lines: list[str], options: DecodeConfig | None = None, checked: bool = False) -> Sources:
        """The lines tokenized once, as `options` will decode them (recased or not, truncated
        to the model's limit), for `translate_encoded`: a server counts their `tokens` against
        its batch budget first. `checked`: the caller has checked every line is text (the
        server's request parser has, naming the request's fields), so it is not done twice."""
        if not checked:
            lines = list(_checked_lines("encode", lines))
        d = options or self.backend.decode
        return self.backend.encode(lines, d.recase, d.glossary, d.glossary_store)

    def translate_encoded(self, sources: Sources, options: DecodeConfig | None = None) -> Output:
        """`translate_n_best` of lines `encode` gave (with the same `options`)."""
        return self.backend.translate_encoded(sources, options)

    def attention(self, line: str, options: DecodeConfig | None = None) -> Attention:
        """The best translation of one line and the last decoder layer's cross-attention
        (averaged over heads), the data `tfm translate --attention` plots."""
        line = _checked_text("attention(): line", line)
        best = self.backend.translate([line], options).translations[0][0]
        recase = (options or self.backend.decode).recase  # the source as it was translated
        src_tokens, tgt_tokens, weights = self.backend.cross_attention(line, best, recase)
        return Attention(best.text, src_tokens, tgt_tokens, weights)


def _checked_text(what: str, value: Any) -> str:
    """`value` if it is text a tokenizer can take: a TypeError naming `what` if it is no str,
    a ValueError if it holds an unpaired surrogate (no UTF-8 encoding exists for it)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is {type(value).__name__}, not str")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(
            f"{what} holds an unpaired surrogate {value[e.start]!r} at index {e.start}, which is not text"
        ) from None
    return value


def _checked_lines(method: str, lines: Iterable[Any]) -> Iterator[str]:
    """The lines given to `method`, each checked by `_checked_text` as it is reached (errors
    name its index, e.g. "translate(): lines[1] is int, not str")."""
    if isinstance(lines, (str, bytes)):
        raise TypeError(f"{method}() takes a list of lines, not one string")
    for i, line in enumerate(lines):
        yield _checked_text(f"{method}(): lines[{i}]", line)


def add_corrections(
    config: str,
    corrections: Sequence[tuple[str, str]],
    client: str | None = None,
    overrides: Sequence[str] = (),
    terms: bool = False,
) -> list[Correction]:
    """Store users' corrections, (source, corrected translation) pairs, in the config's
    corrections.store, each through its guards, as `tfm feedback add` does; returns them with
    their ids and status ("accepted", or "held" with reasons). Accepted ones are answered from
    memory by `tfm serve` at once and trained on by the config's next run. `terms`: the pairs
    are glossary terms (source term, target term: docs/terms.md), which translations with the
    store use from their next call."""
    from .config_loading import load_config
    from .corrections.guards import guarded
    from .corrections.store import LOG, TERMS, Correction, CorrectionStore

    cfg = load_config(config, list(overrides))
    if cfg.corrections.store is None:
        raise UsageError("corrections.store is not set: name the folder corrections are kept in")
    made = [Correction(_checked_text("source", s), _checked_text("corrected", c), None, client) for s, c in corrections]
    store = CorrectionStore(cfg.corrections.store, TERMS if terms else LOG)
    return store.add_batches(made, guarded(cfg.corrections, terms=terms))
