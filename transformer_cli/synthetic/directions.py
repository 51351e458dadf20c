"""The ways a config makes training pairs by translating text, each one `Direction` record:
which text, which side of a pair the translations take, which models translate it (and so
which way they must translate) and how they search (how its pairs are weighted and tagged in
the training mix: training/mix_plan.py).

    back_translation     synthetic.back_translation: target-language text, translated by the
                         reverse model into synthetic sources (Sennrich et al. 2016), with any
                         search strategy (a plugin's too) and its own search_options, or beam
                         search plus noise
    forward_translation  synthetic.forward_translation: source-language text, translated by
                         teachers into synthetic targets with beam search (self-training, He et
                         al. 2020); of the `parallel` text, with synthetic.real_weight 0,
                         sequence-level distillation (Kim & Rush 2016: what `distill:` reads as)

Everything downstream (cleaning, the translation cache, chunked and resumable translation, the
mixed corpus: synthetic/mixture.py) is the same for both.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, DecodeConfig
from ..config_synthetic import NOISED_BEAM
from ..seams import BACK_TRANSLATION_SEARCH
from .noise import noised
from .reverse import back_translation_model

if TYPE_CHECKING:
    from .generate import PostProcess


@dataclass(frozen=True)
class Direction:
    """One way of making pairs from text (see the module docstring)."""

    name: str  # back_translation, forward_translation
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


def directions(cfg: Config) -> list[Direction]:
    """The config's ways of making pairs, those it asks for, in corpus order."""
    out: list[Direction] = []
    if cfg.synthetic.back_translation.text:
        out.append(_back_translation(cfg))
    if cfg.synthetic.forward_translation.text:
        out.append(_forward_translation(cfg))
    return out


def _back_translation(cfg: Config) -> Direction:
    """Target-language text translated by the reverse model with the section's search: a search
    strategy by name, with its search_options (seams.BACK_TRANSLATION_SEARCH)."""
    bt, sc = cfg.synthetic.back_translation, cfg.synthetic
    beam_size = 1 if bt.search in ("sample", "greedy") else bt.beam_size
    # beam and noised_beam: by the beam size (a beam of one is greedy); else that strategy
    strategy = "auto" if BACK_TRANSLATION_SEARCH.entry(bt.search) == "beam" else bt.search
    options = dict(bt.search_options)
    return Direction(
        name="back_translation",
        key=bt.SECTION,
        models_key=f"{bt.SECTION}.model",
        kind="back",
        text=bt.text,
        languages=(cfg.data.tgt_lang, cfg.data.src_lang),
        synthetic_side="src",
        models=[back_translation_model(cfg)],
        search={
            "search": bt.search,
            "seed": sc.seed,
            "beam_size": beam_size,
            "chunk_lines": sc.chunk_lines,
            "batch_size": sc.batch_size,
            **_recorded_options(bt.search, options),
        },
        decode=lambda base: _decode(base, sc.batch_size, beam_size, strategy, options),
        chunk_lines=sc.chunk_lines,
        max_lines=bt.max_lines,
        post=noised if bt.search == NOISED_BEAM else None,
    )


def _recorded_options(search: str, given: dict[str, Any]) -> dict[str, Any]:
    """The search's own settings as a translation cache's identity records them, in the shape
    they had before they were synthetic.back_translation.search_options, so that the caches
    made then stay current: sample's under its former keys, defaults included; another
    strategy's (a plugin's) as given, when any are."""
    if search != "sample":
        return {"strategy_options": given} if given else {}
    settings = BACK_TRANSLATION_SEARCH.options(search, given)
    return {"sampling_topk": settings.topk, "sampling_temperature": settings.temperature}


def _forward_translation(cfg: Config) -> Direction:
    """Source-language text translated by teachers (one model or an ensemble) with beam search."""
    ft, sc = cfg.synthetic.forward_translation, cfg.synthetic
    return Direction(
        name="forward_translation",
        key=ft.SECTION,
        models_key=f"{ft.SECTION}.teachers",
        kind="forward",
        text=ft.text,
        languages=(cfg.data.src_lang, cfg.data.tgt_lang),
        synthetic_side="tgt",
        models=[Path(t) for t in ft.teachers],
        search={
            "search": "beam",
            "beam_size": ft.beam_size,
            "weights": ft.weights,
            "combine": ft.combine,
            "chunk_lines": sc.chunk_lines,
            "batch_size": sc.batch_size,
        },
        decode=lambda base: _decode(base, sc.batch_size, ft.beam_size),
        chunk_lines=sc.chunk_lines,
        max_lines=ft.max_lines,
        weights=ft.weights,
        combine=ft.combine,
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
