"""The ways a config makes training pairs by translating text, each one `Direction` record:
which text, which side of a pair the translations take, which models translate it (and so
which way they must translate) and how they search (how its pairs are weighted and tagged in
the training mix: training/mix_plan.py).

    back_translation     synthetic.back_translation: target-language text, translated by the
                         reverse model into synthetic sources (Sennrich et al. 2016), with any
                         decode.strategy (a plugin's too), or beam search plus noise
    forward_translation  synthetic.forward_translation: source-language text, translated by
                         teachers into synthetic targets (self-training, He et al. 2020)
    distillation         distill: the training sources, translated by teachers with beam search
                         (sequence-level distillation, Kim & Rush 2016): forward translation of
                         the `parallel` text, the real pairs kept only with distill.keep_original

Everything downstream (cleaning, the translation cache, chunked and resumable translation, the
mixed corpus: synthetic/mixture.py) is the same for all three.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import Config, DecodeConfig
from ..config_synthetic import NOISED_BEAM
from .corpora import PARALLEL
from .noise import noised
from .reverse import back_translation_model

if TYPE_CHECKING:
    from .generate import PostProcess

# tfm's own strategies: a search by one of them takes no decode.strategy_options (sample: the
# section's own sampling_topk and sampling_temperature)
BUILT_IN = ("auto", "greedy", "beam", "sample")


class TeacherSearch(Protocol):
    """What a section that names teachers says of their search (forward_translation, distill)."""

    @property
    def beam_size(self) -> int: ...

    @property
    def weights(self) -> list[float] | None: ...

    @property
    def combine(self) -> str: ...


class Chunking(Protocol):
    """How a section cuts the work (synthetic, distill)."""

    @property
    def chunk_lines(self) -> int: ...

    @property
    def batch_size(self) -> int: ...


@dataclass(frozen=True)
class Direction:
    """One way of making pairs from text (see the module docstring)."""

    name: str  # back_translation, forward_translation, distillation
    key: str  # the config section that asks for it (in errors)
    models_key: str  # the config key naming its models
    kind: str  # the translation cache folder's prefix: back, forward
    text: list[str]
    languages: tuple[str, str]  # what the models must translate: from the text's language
    synthetic_side: str  # the side the translations take in a pair: "src" or "tgt"
    models: list[Path]
    search: dict[str, Any]  # the search's settings, as the cache's identity records them
    decode: Callable[[DecodeConfig], DecodeConfig]  # the models' own decoding settings -> the search's
    chunk_lines: int
    max_lines: int | None = None
    weights: list[float] | None = None
    combine: str = "log"
    post: PostProcess | None = None  # noised back-translation's word noise

    @property
    def what(self) -> str:
        """The work's name in log lines and errors: back-translation, forward-translation, ..."""
        return self.name.replace("_", "-")


def makes_pairs(cfg: Config) -> bool:
    """Whether the config trains on pairs made by translating text."""
    return cfg.synthetic.enabled or bool(cfg.distill.teachers)


def real_copies(cfg: Config) -> int:
    """How many times the real pairs stand in the training corpus."""
    if cfg.distill.teachers:
        return 1 if cfg.distill.keep_original else 0
    return cfg.synthetic.real_upsample


def directions(cfg: Config) -> list[Direction]:
    """The config's ways of making pairs, those it asks for, in corpus order."""
    bt, ft, sc, dc = cfg.synthetic.back_translation, cfg.synthetic.forward_translation, cfg.synthetic, cfg.distill
    src, tgt = cfg.data.src_lang, cfg.data.tgt_lang
    out: list[Direction] = []
    if bt.text:
        sampled = bt.search == "sample"
        beam_size = 1 if bt.search in ("sample", "greedy") else bt.beam_size
        # beam and noised_beam: by the beam size (a beam of one is greedy); else that strategy
        strategy = "auto" if bt.search in ("beam", NOISED_BEAM) else bt.search
        own = cfg.decode.strategy_options if strategy not in BUILT_IN else {}  # a plugin's keys
        sampling = {"sampling_topk": bt.sampling_topk, "sampling_temperature": bt.sampling_temperature}
        options = {"topk": bt.sampling_topk, "temperature": bt.sampling_temperature} if sampled else own
        out.append(
            Direction(
                name="back_translation",
                key=bt.SECTION,
                models_key=f"{bt.SECTION}.model",
                kind="back",
                text=bt.text,
                languages=(tgt, src),
                synthetic_side="src",
                models=[back_translation_model(cfg)],
                search={
                    "search": bt.search,
                    "seed": sc.seed,
                    "beam_size": beam_size,
                    "chunk_lines": sc.chunk_lines,
                    "batch_size": sc.batch_size,
                    **(sampling if sampled else {}),
                    **({"strategy_options": own} if own else {}),
                },
                decode=lambda base: _decode(base, sc.batch_size, beam_size, strategy, options),
                chunk_lines=sc.chunk_lines,
                max_lines=bt.max_lines,
                post=noised if bt.search == NOISED_BEAM else None,
            )
        )
    if ft.text:
        out.append(_by_teachers(cfg, "forward_translation", ft.SECTION, ft.text, ft.teachers, ft, sc, ft.max_lines))
    if dc.teachers:
        out.append(_by_teachers(cfg, "distillation", dc.SECTION, [PARALLEL], dc.teachers, dc, dc))
    return out


def _by_teachers(
    cfg: Config,
    name: str,
    key: str,
    text: list[str],
    teachers: list[str],
    search: TeacherSearch,
    chunks: Chunking,
    max_lines: int | None = None,
) -> Direction:
    """Source-language text translated by teachers (one model or an ensemble) with beam search."""
    return Direction(
        name=name,
        key=key,
        models_key=f"{key}.teachers",
        kind="forward",
        text=text,
        languages=(cfg.data.src_lang, cfg.data.tgt_lang),
        synthetic_side="tgt",
        models=[Path(t) for t in teachers],
        search={
            "search": "beam",
            "beam_size": search.beam_size,
            "weights": search.weights,
            "combine": search.combine,
            "chunk_lines": chunks.chunk_lines,
            "batch_size": chunks.batch_size,
        },
        decode=lambda base: _decode(base, chunks.batch_size, search.beam_size),
        chunk_lines=chunks.chunk_lines,
        max_lines=max_lines,
        weights=search.weights,
        combine=search.combine,
    )


def _decode(
    base: DecodeConfig,
    batch_size: int,
    beam_size: int,
    strategy: str = "auto",
    options: dict[str, Any] | None = None,
) -> DecodeConfig:
    """The models' own decoding settings (`base`) with the search the text is translated by."""
    d = copy.deepcopy(base)
    d.beam_size, d.n_best, d.recase, d.batch_size, d.strategy = beam_size, 1, False, batch_size, strategy
    d.strategy_options = dict(options or {})
    return d
