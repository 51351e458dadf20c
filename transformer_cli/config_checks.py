"""Checks of a config that involve more than one key: each a ConfigError holding the keys, the
culprit first, so that the loader can say which file and line (or --set) gave each value."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from .config_corrections import CorrectionsConfig
from .config_model import ModelConfig
from .config_sections import DataConfig, DecodeConfig, TokenizerConfig
from .config_synthetic import SyntheticConfig
from .config_train import TrainConfig
from .config_values import ConfigError, lookup
from .registry import AnyRegistry
from .seams import ARCHITECTURES, SCHEDULES, SEARCH_STRATEGIES, TEXT_CORPORA, TOKENIZERS, choices


class Checked(Protocol):
    """What the checks read of a config (config.Config, which calls them as it is built)."""

    name: str
    data: DataConfig
    tokenizer: TokenizerConfig
    model: ModelConfig
    train: TrainConfig
    decode: DecodeConfig
    synthetic: SyntheticConfig
    corrections: CorrectionsConfig


def validate(cfg: Checked) -> None:
    """Checks that involve more than one key (a ConfigError holding the keys, the culprit first):
    every name a registry gives is known (the config's plugins imported by whoever read it:
    config_loading), with the chosen entry's options; the architecture's own checks; the rest."""
    check_choices(cfg)
    _check_text(cfg.tokenizer)
    cfg.model.check(cfg)
    _check_batches(cfg.train)
    _check_decode(cfg.decode)
    _check_synthetic(cfg)
    _check_source_transforms(cfg)
    _check_runs(cfg)


def _check_text(t: TokenizerConfig) -> None:
    """Subword sampling needs a tokenizer that samples."""
    if t.sampling and not TOKENIZERS[t.kind].samples:
        raise ConfigError(
            f"tokenizer.sampling needs a tokenizer that samples segmentations (sentencepiece; {t.kind} has one)",
            "tokenizer.sampling",
            "tokenizer.kind",
        )


def _check_batches(tr: TrainConfig) -> None:
    """One batch size (sentences or tokens), a known search for validation BLEU."""
    SEARCH_STRATEGIES.check(tr.valid_decode, "train.valid_decode")
    if tr.batch_size is None and tr.batch_tokens is None:
        raise ConfigError(
            "set train.batch_size (sentences) or train.batch_tokens (token budget)",
            "train.batch_size",
            "train.batch_tokens",
        )
    if tr.batch_size is not None and tr.batch_tokens is not None:
        raise ConfigError(
            "train.batch_size and train.batch_tokens are exclusive: set one to null",
            "train.batch_size",
            "train.batch_tokens",
        )


def _check_decode(dc: DecodeConfig) -> None:
    """n_best within the beam (and what the strategy returns); one weight per ensemble model."""
    if dc.n_best > dc.beam_size:
        raise ConfigError(
            f"decode.n_best={dc.n_best} must be <= decode.beam_size={dc.beam_size}",
            "decode.n_best",
            "decode.beam_size",
        )
    settings = None if dc.strategy in SEARCH_STRATEGIES.keywords else SEARCH_STRATEGIES.settings_of(dc.strategy)
    most = getattr(settings, "MOST_N_BEST", None)  # a strategy that returns fewer than a beam does
    if most is not None and dc.n_best > most:
        raise ConfigError(
            f"decode.strategy: {dc.strategy} returns {most} translation{'s' if most > 1 else ''} a source: "
            f"set decode.n_best to {most} or fewer",
            "decode.n_best",
            "decode.strategy",
        )
    if dc.ensemble_weights is not None and (
        len(dc.ensemble_weights) != len(dc.ensemble) or not all(w > 0 for w in dc.ensemble_weights)
    ):
        raise ConfigError(
            f"decode.ensemble_weights must be one positive number per model of decode.ensemble ({len(dc.ensemble)})",
            "decode.ensemble_weights",
            "decode.ensemble",
        )


def _check_runs(cfg: Checked) -> None:
    """The rest: two languages, the parent, retrain's epochs, the name."""
    tr, d = cfg.train, cfg.data
    if d.src_lang == d.tgt_lang:
        raise ConfigError(f"data.src_lang and data.tgt_lang are both '{d.src_lang}'", "data.src_lang", "data.tgt_lang")
    if tr.init_from is not None and not tr.init_from.strip():
        raise ConfigError(
            "train.init_from must name a checkpoint file or be `published` (null: start from random weights)",
            "train.init_from",
        )
    rt = tr.retrain
    if rt.min_epochs is not None and rt.min_epochs > rt.max_epochs:
        raise ConfigError(
            f"train.retrain.min_epochs={rt.min_epochs} must be <= train.retrain.max_epochs={rt.max_epochs}",
            "train.retrain.min_epochs",
            "train.retrain.max_epochs",
        )
    if not cfg.name or "/" in cfg.name or cfg.name.startswith("."):
        raise ConfigError(f"name={cfg.name!r} must be a plain directory name", "name")


def check_choices(cfg: Checked) -> None:
    """Every key that names a registry's entry names one (an unknown name: a ConfigError that
    lists the known ones; a dotted path to an object of another shape: one saying so), the
    entry's options are its settings (seams.choices: each registry's key, and the others that
    choose from one, as synthetic.back_translation.search): of a list of entries
    (train.transforms), each one's under its name; and what an imported entry makes of the
    config is what its registry makes (Registry.check_made)."""
    for choice in choices():
        value = lookup(cfg, choice.key)
        given = lookup(cfg, choice.options_key) if choice.options_key else None
        if isinstance(value, list):
            _check_listed(choice.registry, value, given)
        else:
            choice.check(value)
            if given:  # (none given: nothing to check, and the entry is not imported to look)
                choice.options(value, given)
        for name in value if isinstance(value, list) else [choice.entry(value)]:
            choice.registry.check_made(name, cfg, choice.key)
    continued = cfg.train.continued.schedule_options
    if continued:
        options = {**cfg.train.schedule_options, **continued}
        SCHEDULES.options(cfg.train.schedule, options, "train.continued.schedule_options")
    settings = ARCHITECTURES.settings_of(cfg.model.architecture)
    if type(cfg.model) is not settings:
        raise ConfigError(
            f"model.architecture={cfg.model.architecture!r}: the model section was read as "
            f"{type(cfg.model).__name__}, not that architecture's "
            f"{getattr(settings, '__name__', settings)}: give model.architecture in the "
            "config file (not only with --set)",
            "model.architecture",
        )


def _check_listed(registry: AnyRegistry, names: list[str], given: dict[str, Any] | None) -> None:
    """A list of entries (train.transforms): each one known, and the options given by name
    (train.transform_options.<name>) those of an entry of the list, checked by its settings."""
    for name in names:
        registry.check(name)
    for name, options in (given or {}).items():
        key = f"{registry.options_key}.{name}"
        if name not in names:
            raise ConfigError(f"{key}: {name!r} is not in {registry.key} ({', '.join(names) or 'none'})", key)
        registry.options(name, options, key)


def _check_source_transforms(cfg: Checked) -> None:
    """A source's own transforms are some of train.transforms (training/mix_plan.py)."""
    bt, ft = cfg.synthetic.back_translation, cfg.synthetic.forward_translation
    for key, names in (
        (bt.SECTION, bt.transforms),
        (ft.SECTION, ft.transforms),
        ("corrections", cfg.corrections.transforms),
    ):
        others = [name for name in names or [] if name not in cfg.train.transforms]
        if others:
            raise ConfigError(
                f"{key}.transforms: {', '.join(others)} not among train.transforms "
                f"({', '.join(cfg.train.transforms) or 'none'}): a source takes some of those",
                f"{key}.transforms",
                "train.transforms",
            )


def _check_synthetic(cfg: Checked) -> None:
    ft, bt = cfg.synthetic.forward_translation, cfg.synthetic.back_translation
    if "seed" in bt.search_options:  # (a key of the strategy's settings: check_choices)
        raise ConfigError(
            "synthetic.back_translation.search_options.seed: the draws are seeded by synthetic.seed "
            "(one seed per chunk, whichever run translates it): set that",
            "synthetic.back_translation.search_options.seed",
            "synthetic.seed",
        )
    for side, entries in (("back_translation", cfg.synthetic.back_translation.text), ("forward_translation", ft.text)):
        for entry in entries:  # a bare word that is no file here: a corpus name, checked now
            if not any(mark in entry for mark in "/.\\") and not Path(entry).exists():
                TEXT_CORPORA.check(entry, f"synthetic.{side}.text")
    if ft.text and not ft.teachers:
        raise ConfigError(
            "synthetic.forward_translation.teachers is empty: name the models that "
            "translate synthetic.forward_translation.text",
            "synthetic.forward_translation.teachers",
        )
    if ft.weights is not None and len(ft.weights) != len(ft.teachers):
        raise ConfigError(
            f"synthetic.forward_translation.weights must be one number per teacher ({len(ft.teachers)})",
            "synthetic.forward_translation.weights",
            "synthetic.forward_translation.teachers",
        )
