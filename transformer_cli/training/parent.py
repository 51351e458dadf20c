"""The trained model a run starts from (`train.init_from`), and how it shapes the run.

    init_from: published    this run's published.pt, when the run starts anew; while none is
                            published yet the run trains from scratch (and says so)
    init_from: FILE         a tfm checkpoint
    init_from: FOLDER       a Hugging Face MarianMT model (transformers' files), or its Hub
                            id (OWNER/NAME, fetched once): model_io.read_model

The parent gives the new run
- its weights (`Trainer.start_from`);
- its architecture: the model settings stored in its checkpoint; the config's dropouts stay,
  and other model.* keys of the config that differ are named in a warning and not used;
- its tokenizers: preprocessing encodes the corpus with them (`GivenTokenizers`) instead of
  fitting new ones, so the parent and the new model give a text the same ids and the
  promotion gate compares their validation losses. The run records the parent's tokenizer
  settings (the config's tokenizer.sampling stays: it regularizes this run's training); other
  tokenizer.* keys of the config that differ are named in a warning and not used.

What starts afresh is everything the optimizer and the schedule carry: Adam's moments, the
learning-rate schedule with its warmup, early stopping, the snapshots to average, the epoch
and step counts; `train.continued` gives the train.* values of a continued run.

A run's identity (run_dir.run_identity) names the parent as configured: `published`, or the
file's sha256. So a changed parent file starts the run over, while `published` stands for the
model published when the run began: its own promotion does not restart a finished run, and
the nightly command is a no-op until the corpus (or a setting) changes.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, CheckpointError
from ..config import Config, ModelConfig, TokenizerConfig
from ..config_checks import validate
from ..config_values import ConfigError, as_before, build_section
from ..data.freshness import GivenTokenizers
from ..errors import UsageError
from ..hf.folder import HUB_ID
from ..model_io import read_model
from ..tokenizers.pair import TokenizerPair
from .promotion import published_or_restored
from .retrain_policy import scratch_decided
from .run_dir import RunDir
from .vocabulary_growth import stored_growth

log = logging.getLogger("tfm")

PUBLISHED = "published"
# Tokenizer settings a continued run may change: they shape no id (subword sampling regularizes
# the training split's segmentation, as dropout does the model).
TOKENIZER_REGULARIZATION_KEYS = ("sampling",)


@dataclass
class Parent:
    """A verified trained model that a new run starts from."""

    checkpoint: Checkpoint
    spec: str  # train.init_from as configured: PUBLISHED or a path
    path: Path  # the file it was read from

    @property
    def record(self) -> dict[str, Any]:
        """What checkpoints and manifests record of it."""
        return {"from": self.spec, "path": str(self.path), "sha256": self.checkpoint.sha256}

    @functools.cached_property
    def pair(self) -> TokenizerPair:
        """Its tokenizers."""
        try:
            return TokenizerPair.from_state(self.checkpoint.tokenizer)
        except ValueError as e:
            raise UsageError(f"train.init_from: {self.path}: its tokenizer cannot be used: {e}") from None

    def tokenizers(self, run: RunDir | None = None) -> GivenTokenizers:
        """The tokenizers preprocessing encodes the new corpus with (and their settings): its
        own, or grown by the pieces `run` stores for it (train.retrain.grow_vocabulary)."""
        grown = None if run is None else stored_growth(run, self.pair, self.checkpoint.digest)
        if grown is None:
            return GivenTokenizers(self.pair, self.record, self.tokenizer_settings())
        record = {**self.record, "grown_to": [grown.src.vocab_size, grown.tgt.vocab_size]}
        return GivenTokenizers(grown, record, self.tokenizer_settings())

    def tokenizer_settings(self) -> TokenizerConfig:
        """The tokenizer settings its checkpoint records; for a model that records none of its
        tokenizers' (one made elsewhere, such as a Hugging Face model), what they say of
        themselves: kind, joint vocabulary, lowercasing."""
        recorded = self.checkpoint.config.get("tokenizer")
        kind = self.pair.src.kind
        if not isinstance(recorded, dict) or recorded.get("kind") != kind:
            recorded = {"kind": kind, "joint": self.pair.joint, "lowercase": self.pair.src.lowercase}
        try:
            tokenizer: TokenizerConfig = build_section(TokenizerConfig, recorded, "tokenizer")
            return tokenizer
        except UsageError as e:
            raise UsageError(
                f"train.init_from: {self.path}: its tokenizer settings do not fit this version of tfm: {e}"
            ) from None


def lineage(cfg: Config, tokenizer_digest: str, parent: Parent | None) -> dict[str, Any] | None:
    """What a run with train.init_from adds to its identity (None without): the parent as
    configured (a file by its sha256), the tokenizers' digest and train.continued."""
    spec = cfg.train.init_from
    if spec is None:
        return None
    named = PUBLISHED if spec == PUBLISHED or parent is None else parent.checkpoint.sha256
    return {"init_from": named, "tokenizer": tokenizer_digest, "continued": as_before(cfg.train.continued)}


def resolve_parent(cfg: Config, run: RunDir, repair: bool = True) -> Parent | None:
    """The parent train.init_from names, verified (None: no init_from, or nothing published
    yet). A missing, damaged or unsafe file is a UsageError (exit 2) naming it; a damaged
    published.pt is restored from published.history/ when `repair` (the first rank does)."""
    spec = cfg.train.init_from
    if spec is None:
        return None
    if spec != PUBLISHED and Path(spec).resolve() == run.published.resolve():
        spec = PUBLISHED  # the run's own published model: follow it as `published` does
    if spec == PUBLISHED:
        if repair:
            checkpoint = published_or_restored(run)
        else:  # the first rank has verified and repaired it
            checkpoint = _read(run.published)[0] if run.published.is_file() else None
        if checkpoint is None:
            log.info("train.init_from: published: nothing is published in %s yet: training from scratch", run.path)
            return None
        return Parent(checkpoint, PUBLISHED, run.published)
    if not Path(spec).exists() and not HUB_ID.match(spec):
        raise UsageError(f"train.init_from: no such checkpoint: {spec}")
    checkpoint, path = _read(spec)
    return Parent(checkpoint, spec, path)


def parent_tokenizers(cfg: Config) -> GivenTokenizers | None:
    """The tokenizers `cfg`'s corpus is encoded with when it continues a model (None: it fits
    its own, as a run that train.retrain retrains from scratch does), for the commands that
    prepare data besides `tfm train` (preprocess, evaluate), so that they do not rebuild the
    folder with tokenizers of their own. Nothing is repaired."""
    run = RunDir(cfg.run_dir)
    parent = resolve_parent(cfg, run, repair=False)
    if parent is None or (parent.spec == PUBLISHED and scratch_decided(run, parent.checkpoint.digest)):
        return None
    return parent.tokenizers(run)


def _read(spec: str | Path) -> tuple[Checkpoint, Path]:
    """A parent model, verified (a UsageError naming init_from when it cannot be)."""
    try:
        return read_model(spec)
    except (UsageError, CheckpointError) as e:  # missing, unsafe, damaged, of a newer tfm
        raise UsageError(f"train.init_from: {e}") from None


def continued_config(cfg: Config, parent: Parent) -> Config:
    """`cfg` as a run from `parent` trains (and records it): the parent's model settings (with
    the config's dropouts), its tokenizer settings (with the config's tokenizer.sampling), and
    train.continued's values over train.*."""
    out = copy.deepcopy(cfg)
    out.model = _parent_model(cfg, parent)
    out.tokenizer = _parent_tokenizer(cfg, parent)
    for f in dataclasses.fields(cfg.train.continued):
        value = getattr(cfg.train.continued, f.name)
        if isinstance(value, dict):  # options: key by key over the train's
            setattr(out.train, f.name, {**getattr(out.train, f.name), **value})
        elif value is not None:
            setattr(out.train, f.name, value)
    try:
        validate(out)
    except ConfigError as e:
        raise UsageError(f"train.init_from: with the parent's model and tokenizers and train.continued: {e}") from None
    return out


def _parent_model(cfg: Config, parent: Parent) -> ModelConfig:
    """The parent's model settings with the config's regularization (its family's
    ModelConfig.REGULARIZATION: the Transformer's dropouts); the config's others that differ are
    named in a warning."""
    try:
        model: ModelConfig = build_section(ModelConfig, parent.checkpoint.model_config, "model")
    except UsageError as e:
        raise UsageError(
            f"train.init_from: {parent.path}: its model settings do not fit this version of tfm: {e}"
        ) from None
    for key in type(model).REGULARIZATION:  # the parent's family's (config.ModelConfig)
        if hasattr(cfg.model, key):  # (a config of another family: named in the warning below)
            setattr(model, key, getattr(cfg.model, key))
    differing = _differing("model", cfg.model, model, dataclasses.fields(model))
    if differing:
        log.warning(
            "warning: train.init_from: the model is the parent's (%s), not the config's: %s",
            parent.path,
            ", ".join(differing),
        )
    return model


def _parent_tokenizer(cfg: Config, parent: Parent) -> TokenizerConfig:
    """The parent's tokenizer settings with the config's tokenizer.sampling; the config's
    others that differ are named in a warning."""
    tokenizer = parent.tokenizer_settings()
    for key in TOKENIZER_REGULARIZATION_KEYS:
        setattr(tokenizer, key, getattr(cfg.tokenizer, key))
    differing = _differing("tokenizer", cfg.tokenizer, tokenizer, dataclasses.fields(TokenizerConfig))
    if differing:
        log.warning(
            "warning: train.init_from: the tokenizers are the parent's (%s), not the config's: %s",
            parent.path,
            ", ".join(differing),
        )
    return tokenizer


def _differing(section: str, ours: Any, theirs: Any, fields: tuple[dataclasses.Field[Any], ...]) -> list[str]:
    """`section.key ours -> theirs` for each of `fields` whose values differ."""
    return [
        f"{section}.{f.name} {getattr(ours, f.name)!r} -> {getattr(theirs, f.name)!r}"
        for f in fields
        if getattr(ours, f.name) != getattr(theirs, f.name)
    ]
