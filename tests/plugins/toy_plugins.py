"""A user's module of toys, one entry per seam, each with its own config keys: tests/test_plugins.py
names it in a config's `plugins:`, and tfm imports it before reading the rest of the config.

    model.architecture: toy        model.width, model.layers        (not the Transformer's keys)
    tokenizer.kind: toy_chars      tokenizer.options.space
    train.criterion: toy_scaled    train.criterion_options.scale
    train.optimizer: toy_sgd       train.optimizer_options.momentum
    train.schedule: toy_decay      train.schedule_options.factor
    decode.strategy: toy_short     decode.strategy_options.max_tokens
    export.format: toy_copy        export.options.note              (and its engine, toy_copy)
    data.corpus: toy_corpus        data.corpus_options.folder, .suffix

Each says it was used, with the value of its key, on a line of the file $TOY_PLUGINS_LOG (if set).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from transformer_cli.api import open_torch
from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import ModelConfig
from transformer_cli.config_values import ConfigError
from transformer_cli.contracts.corpus import ParallelCorpus
from transformer_cli.contracts.engine import Engine
from transformer_cli.contracts.exporter import Exporter
from transformer_cli.contracts.strategy import SearchStrategy
from transformer_cli.contracts.tokenizer import Tokenizer
from transformer_cli.errors import UsageError
from transformer_cli.export_manifest import ExportManifest
from transformer_cli.fsutil import atomic_write_folder
from transformer_cli.inference.search import greedy_search
from transformer_cli.loss import sequence_loss
from transformer_cli.model.builders import register_architecture
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.seams import (
    CORPORA,
    CRITERIA,
    ENGINES,
    EXPORTERS,
    OPTIMIZERS,
    SCHEDULES,
    SEARCH_STRATEGIES,
    TOKENIZERS,
)
from transformer_cli.tokenizers.base import strip_specials
from transformer_cli.tokenizers.vocab import SPECIALS, Vocab


def used(what: str) -> None:
    if os.environ.get("TOY_PLUGINS_LOG"):
        with open(os.environ["TOY_PLUGINS_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{what}\n")


# -- model.architecture: toy -------------------------------------------------------------------
@dataclass
class ToyModelConfig(ModelConfig):
    """A family with two keys of its own and none of the Transformer's."""

    width: int = 16
    layers: int = 1

    def check(self, cfg: Any) -> None:
        if self.width % 2:
            raise ConfigError(f"model.width={self.width} must be even", "model.width")


class ToyModel(Seq2SeqTransformer):
    ARCHITECTURE = "toy"

    def __init__(self, cfg: ToyModelConfig, src_vocab_size: int, tgt_vocab_size: int, src_ids: Any, tgt_ids: Any):
        inner = TransformerConfig(
            d_model=cfg.width,
            n_heads=2,
            n_encoder_layers=cfg.layers,
            n_decoder_layers=cfg.layers,
            d_ff=2 * cfg.width,
            dropout=0.0,
            max_len=cfg.max_len,
        )
        super().__init__(inner, src_vocab_size, tgt_vocab_size, src_ids, tgt_ids)
        used(f"model width={cfg.width}")


register_architecture("toy", ToyModel, ToyModelConfig)


# -- tokenizer.kind: toy_chars -----------------------------------------------------------------
@dataclass
class CharOptions:
    space: str = "_"  # what a space becomes


class ToyChars(Tokenizer):
    """Every character a token, spaces written as `space`."""

    kind = "toy_chars"
    settings: ClassVar[type | None] = CharOptions

    def __init__(self, itos: list[str], space: str):
        self.vocab, self.space, self.lowercase = Vocab(itos), space, False
        self.ids = self.vocab.ids

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @classmethod
    def fit(cls, cfg, langs, text):
        options = TOKENIZERS.options(cfg.kind, cfg.options)
        sources, targets = text.sample(10_000)
        chars = sorted(set("".join(sources + targets).replace(" ", options.space)))
        shared = cls([*SPECIALS, *chars], options.space)
        used(f"tokenizer space={options.space}")
        return shared, shared

    def encode_batch(self, lines, progress=None):
        return [self.vocab.lookup(list(line.replace(" ", self.space))) for line in lines]

    def decode(self, ids):
        return "".join(self.vocab.tokens(strip_specials(ids, self.ids))).replace(self.space, " ")

    def id_to_token(self, ids):
        return self.vocab.tokens(ids)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "itos": self.vocab.itos, "space": self.space}

    @classmethod
    def from_state(cls, state):
        return cls(state["itos"], state["space"])


TOKENIZERS.register("toy_chars", ToyChars)


# -- train.criterion: toy_scaled ---------------------------------------------------------------
@dataclass
class ScaleOptions:
    scale: float = 1.0


class ScaledNll:
    def __init__(self, pad_id: int, scale: float):
        self.pad_id, self.scale = pad_id, scale
        used(f"criterion scale={scale}")

    def __call__(self, net, batch, dtype):
        loss, nll = sequence_loss(net(batch.src, batch.tgt_in), batch.tgt_out, self.pad_id, 0.0)
        return loss * self.scale, nll


CRITERIA.register(
    "toy_scaled",
    lambda tc, pad_id: ScaledNll(pad_id, CRITERIA.options(tc.criterion, tc.criterion_options).scale),
    settings=ScaleOptions,
)


# -- train.optimizer: toy_sgd, train.schedule: toy_decay -----------------------------------------
@dataclass
class SgdOptions:
    momentum: float = 0.0


def toy_sgd(groups: list[dict[str, Any]], tc: Any, device: Any) -> Any:
    import torch

    momentum = OPTIMIZERS.options(tc.optimizer, tc.optimizer_options).momentum
    used(f"optimizer momentum={momentum}")
    return torch.optim.SGD(groups, lr=tc.lr, momentum=momentum)


@dataclass
class DecayOptions:
    factor: float = 0.5


OPTIMIZERS.register("toy_sgd", toy_sgd, settings=SgdOptions)
SCHEDULES.register(
    "toy_decay",
    lambda tc, step: SCHEDULES.options(tc.schedule, tc.schedule_options).factor ** step,
    settings=DecayOptions,
)


# -- decode.strategy: toy_short ----------------------------------------------------------------
@dataclass
class ShortOptions:
    max_tokens: int = 3


class Short(SearchStrategy):
    """Greedy search cut at decode.strategy_options.max_tokens tokens."""

    name = "toy_short"
    settings: ClassVar[type | None] = ShortOptions

    def search(self, model, src, limits, d):
        most = SEARCH_STRATEGIES.options(d.strategy, d.strategy_options).max_tokens
        used(f"strategy max_tokens={most}")
        return [[h] for h in greedy_search(model, src, limits.clamp(max=most))]


SEARCH_STRATEGIES.register("toy_short", Short())


# -- export.format: toy_copy, and the engine that runs its folders -----------------------------
@dataclass
class NoteOptions:
    note: str = ""


class CopyExporter(Exporter):
    """The checkpoint copied into a folder, with the note in the manifest."""

    engine = "toy_copy"
    settings: ClassVar[type | None] = NoteOptions

    def refusals(self, checkpoint: Checkpoint) -> list[str]:
        return [] if checkpoint.architecture == "toy" else [f"{checkpoint.architecture} is no toy"]

    def export(
        self, checkpoint: Checkpoint, source: Path, output: Path, options: NoteOptions
    ) -> tuple[ExportManifest, float]:
        started = time.perf_counter()
        if self.refusals(checkpoint):
            raise UsageError(f"cannot export {source} as a toy copy: {'; '.join(self.refusals(checkpoint))}")
        written = []

        def write(folder: Path) -> None:
            shutil.copyfile(source, folder / "model.pt")
            manifest = ExportManifest.new(self.engine, source, checkpoint, folder, note=options.note)
            manifest.write(folder)
            written.append(manifest)

        atomic_write_folder(output, write)
        return written[0], time.perf_counter() - started

    def describe(self, manifest: ExportManifest) -> str:
        return f"toy copy: {manifest.details['note']}"


EXPORTERS.register("toy_copy", CopyExporter())
ENGINES.register(
    "toy_copy",
    Engine(
        lambda path, device, precision, decode, threads: open_torch(
            path / "model.pt", device, precision, decode, threads
        )
    ),
)


# -- data.corpus: toy_corpus -------------------------------------------------------------------
@dataclass
class FolderOptions:
    folder: str = ""
    suffix: str = ".txt"


class FolderCorpus(ParallelCorpus):
    """Files `<stem>.<lang><suffix>` in data.corpus_options.folder."""

    settings: ClassVar[type | None] = FolderOptions

    def default_source(self, options: FolderOptions) -> str | None:
        used(f"corpus folder={Path(options.folder).name}")
        return options.folder or None

    def file_names(self, stem: str, lang: str, options: FolderOptions) -> list[str]:
        return [f"{stem}.{lang}{options.suffix}"]


CORPORA.register("toy_corpus", FolderCorpus())
