"""Text in, text out: the backend interface (`TranslationBackend`) and its torch backend
(`TorchTranslator`: a checkpoint's model and tokenizers)."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import Checkpoint, CheckpointError, ModelDescription
from ..config import DecodeConfig, ModelConfig
from ..config_sections import saved_decode
from ..config_values import build_section
from ..contracts.model import FeatureDecoder, TranslationModel
from ..contracts.strategy import Hypothesis
from ..data.batching import pad_batch
from ..data.shards import TokenPairs
from ..errors import UsageError
from ..host.device import autocast
from ..host.threads import Threads
from ..model.builders import build_model
from ..tokenizers.pair import TokenizerPair
from .constrained import constrained_beam_search
from .near import Datastore, ExampleKeys, NearMatchDecoder
from .near_keys import Keys, KeysFile, keys_folder
from .outputs import Example, NearSettings, Output, Sources, Translation
from .search import output_limits
from .strategies import strategy_for
from .teacher_forcing import corpus_nll, eval_mode
from .terms import Glossaries, honour_terms, terms_of


def model_from_checkpoint(
    checkpoint: Checkpoint, path: Path | None = None
) -> tuple[TranslationModel[Any], TokenizerPair]:
    """Rebuild the model and tokenizers a checkpoint holds (`path`, the file it was read from,
    is named in errors)."""
    try:
        cfg = build_section(ModelConfig, checkpoint.model_config, "model")
        tokenizers = TokenizerPair.from_state(checkpoint.tokenizer)
        model = build_model(
            checkpoint.architecture,
            cfg,
            checkpoint.src_vocab_size,
            checkpoint.tgt_vocab_size,
            tokenizers.src.ids,
            tokenizers.tgt.ids,
        )
        model.load_state_dict(checkpoint.weights)
    except (KeyError, TypeError, ValueError, RuntimeError, UsageError) as e:
        raise CheckpointError.unfit(path, e) from None
    return model, tokenizers


@dataclass(frozen=True)
class EnsembleMember:
    path: str
    sha256: str
    languages: tuple[str, str] | None = None  # (source, target), when its config says


@dataclass(frozen=True)
class ModelMetadata:
    """What a backend loaded. `sha256` names it (a checkpoint's content digest; an export's
    manifest file; an ensemble's digest of its members'), `config` is the run config it was
    trained with and `metrics` its validation figures."""

    sha256: str = ""
    model: ModelDescription | None = None
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    checkpoint_sha256: str | None = None  # an export: the checkpoint it was made from
    members: list[EnsembleMember] = field(default_factory=list)  # an ensemble: its models
    ensemble_weights: list[float] | None = None
    ensemble_combine: str | None = None
    training: dict[str, Any] = field(default_factory=dict)  # a checkpoint's record of its run (Checkpoint.training)

    @property
    def languages(self) -> tuple[str, str] | None:
        """(source, target) language codes of the model's data, when it says (None: unknown)."""
        return config_languages(self.config)


def config_languages(config: dict[str, Any]) -> tuple[str, str] | None:
    """(source, target) language codes of a run config's data (None: it does not say)."""
    data = config.get("data", {})
    src, tgt = data.get("src_lang"), data.get("tgt_lang")
    return (src, tgt) if isinstance(src, str) and isinstance(tgt, str) else None


class TranslationBackend(ABC):
    """The backend interface: lines of text in, results out, every call returning its results.
    It does the text side (tokenization, truncation of long inputs, length-sorted batches,
    detokenization); subclasses run the network: `TorchTranslator` on torch, `export.ct2_translator.
    Ct2Translator` on CTranslate2. `api.open_backend` is the one place that opens either."""

    def __init__(self, tokenizers: TokenizerPair, decode: DecodeConfig, max_positions: int, metadata: ModelMetadata):
        self.tokenizers = tokenizers
        self.decode = decode  # the decoding defaults stored with the model
        self.max_src_len = max_positions - 1  # room for <eos>
        self.metadata = metadata
        # Sources are tokenized one call at a time, whichever thread asks (a server tokenizes
        # requests on a thread of its own while a translation or /attention runs).
        self._tokenizing = threading.Lock()
        # Told each batch's tokens (source + output) and time when the threads are tuned
        # (api.open_backend with threads="auto"); None: they are left as they are.
        self.threads: Threads | None = None
        self.glossaries = Glossaries()  # decode.glossary's files, read once each, and stores' terms

    @property
    def tunes_threads(self) -> bool:
        """Whether its decoding runs on torch threads of this process that a ThreadTuner may set
        (api.open_backend with threads="auto")."""
        return False

    @property
    def reads_examples(self) -> bool:
        """Whether its model reads example pairs (near-matches: `example_keys`)."""
        return False

    def example_keys(self, pairs: list[tuple[str, str]]) -> list[Keys]:
        """Example pairs' keys as its model reads them (see `reads_examples`)."""
        raise TypeError(f"{type(self).__name__} reads no examples: it has no keys for example pairs")

    def encode_sources(
        self, lines: list[str], recase: bool | None = None
    ) -> tuple[list[torch.Tensor], list[tuple[int, int]]]:
        """Token ids + <eos> per line, truncated to the model's positions, and the (index,
        length) of each line that was. Lines without casing are recased first unless `recase`
        (default: decode.recase) is off."""
        recase = self.decode.recase if recase is None else recase
        out, truncated, eos = [], [], self.tokenizers.src.ids.eos
        with self._tokenizing:
            encoded = self.tokenizers.encode_sources(lines, recase)
        for i, ids in enumerate(encoded):
            if len(ids) > self.max_src_len:
                truncated.append((i, len(ids)))
                ids = ids[: self.max_src_len]
            out.append(torch.tensor([*ids, eos]))
        return out, truncated

    def encode(
        self,
        lines: list[str],
        recase: bool | None = None,
        glossary: str | None = None,
        glossary_store: str | None = None,
    ) -> Sources:
        """The lines as `translate_encoded` decodes them: the non-empty ones encoded (see
        `encode_sources`), with the terms each holds of the `glossary` file (decode.glossary)
        and the `glossary_store` (decode.glossary_store: a corrections store's terms)."""
        positions = [i for i, line in enumerate(lines) if line.strip()]
        ids, truncated = self.encode_sources([lines[i] for i in positions], recase)
        terms = terms_of(self.glossaries.get(glossary, glossary_store), [lines[i] for i in positions])
        return Sources(len(lines), positions, ids, [(positions[j], n) for j, n in truncated], terms)

    def translate(
        self, lines: list[str], decode: DecodeConfig | None = None, check_stop: Callable[[], None] | None = None
    ) -> Output:
        """n-best translations for each line (empty lines give one empty translation), with
        `decode` (default: self.decode) for this call only. `check_stop` is called before each
        batch (it may raise to abandon the call)."""
        d = decode or self.decode
        return self.translate_encoded(self.encode(lines, d.recase, d.glossary, d.glossary_store), d, check_stop)

    def translate_encoded(
        self, sources: Sources, decode: DecodeConfig | None = None, check_stop: Callable[[], None] | None = None
    ) -> Output:
        """`translate` of lines already encoded (with `decode`'s recase setting)."""
        d = decode or self.decode
        results: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in range(sources.n_lines)]
        near: list[list[str]] = [[] for _ in range(sources.n_lines)] if any(sources.examples) else []
        ids = sources.ids
        order = sorted(range(len(ids)), key=lambda j: len(ids[j]))  # similar lengths together
        for start in range(0, len(order), d.batch_size):
            if check_stop is not None:
                check_stop()
            chunk = order[start : start + d.batch_size]
            started = time.perf_counter()
            examples = [sources.examples[j] for j in chunk] if near else []
            if any(examples):
                found, drawn_on = self._search_near([ids[j] for j in chunk], d, examples, sources.near)
                for j, line, used in zip(chunk, examples, drawn_on):
                    near[sources.positions[j]] = [line[i].id for i in sorted(used)]
            else:
                found = self._search([ids[j] for j in chunk], d)
            if self.threads is not None:
                work = sum(len(ids[j]) for j in chunk) + sum(len(h[0].tokens) for h in found if h)
                self.threads.record(work, time.perf_counter() - started)
            for j, hyps in zip(chunk, found):
                results[sources.positions[j]] = [
                    Translation(self.tokenizers.tgt.decode(h.tokens), h.tokens, h.score) for h in hyps
                ]
        if not sources.terms:
            return Output(results, list(sources.truncated), near=near)
        terms = honour_terms(sources, results, self.tokenizers.tgt, lambda src, c: self._constrained(src, c, d))
        return Output(results, list(sources.truncated), terms, near)

    def _search_near(
        self, sources: list[torch.Tensor], d: DecodeConfig, examples: list[list[Example]], near: NearSettings
    ) -> tuple[list[list[Hypothesis]], list[set[int]]]:
        """`_search` with each source's example pairs mixed in (inference/near.py), and the
        examples each drew on (indices into its list). This backend cannot: it searches without
        them and says none was drawn on."""
        return self._search(sources, d), [set() for _ in sources]

    def _constrained(
        self, source: torch.Tensor, constraints: list[list[int]], d: DecodeConfig
    ) -> tuple[Translation, list[str]] | None:
        """`source` (ids ending in <eos>) translated with each of `constraints` (target ids) in
        it where it fits, and per constraint why it is not ("": it is); None: this backend
        cannot constrain its search."""
        return None

    @abstractmethod
    def _search(self, sources: list[torch.Tensor], d: DecodeConfig) -> list[list[Hypothesis]]:
        """The n-best hypotheses, best first, of each source (ids ending in <eos>)."""

    @abstractmethod
    def corpus_nll(self, split: TokenPairs, check_stop: Callable[[], None] | None = None) -> tuple[float, int]:
        """Summed negative log-likelihood of the targets given the sources (teacher forcing,
        `<eos>` included, both sides cut to the model's positions) and the target tokens scored."""

    @abstractmethod
    def cross_attention(
        self, line: str, translation: Translation, recase: bool | None = None
    ) -> tuple[list[str], list[str], list[list[float]]]:
        """Source tokens, target tokens and the last decoder layer's attention averaged over
        heads, [tgt_len][src_len] (rows sum to 1), for one sentence and its translation, the
        source encoded as it was translated (`recase`: see encode_sources)."""


CONSTRAINED_BEAM = 5  # the least beam a constrained search runs with
_UNPLACEABLE = "the model cannot write it (a word unknown to it, or longer than the output may be)"
_NO_ROOM = "the search found no translation holding it within the output's length"


class TorchTranslator(TranslationBackend):
    """Translates lines of text with a trained model on torch; long inputs are truncated."""

    def __init__(
        self,
        model: TranslationModel[Any],
        tokenizers: TokenizerPair,
        device: torch.device,
        decode: DecodeConfig,
        dtype: torch.dtype | None = None,
        metadata: ModelMetadata | None = None,
    ):
        super().__init__(tokenizers, decode, model.config.max_len, metadata or ModelMetadata())
        self.model = model.to(device)
        self.device = device
        self.dtype = dtype
        # Example pairs' sources are encoded as the lines translated are (decode.recase).
        self._example_keys = ExampleKeys(model, tokenizers, device, lambda texts: self.encode_sources(texts)[0])
        self._ahead: KeysFile | None = None  # the keys computed ahead last read (near_keys.py)

    @property
    def tunes_threads(self) -> bool:
        return self.device.type == "cpu"

    @classmethod
    def from_checkpoint(
        cls, path: Path, device: torch.device, decode: DecodeConfig | None = None, dtype: torch.dtype | None = None
    ) -> TorchTranslator:
        """The checkpoint file at `path`, verified on the way in."""
        return cls.load(Checkpoint.read(path), device, decode, dtype, path)

    @classmethod
    def load(
        cls,
        checkpoint: Checkpoint,
        device: torch.device,
        decode: DecodeConfig | None = None,
        dtype: torch.dtype | None = None,
        path: Path | None = None,
    ) -> TorchTranslator:
        """`checkpoint`'s model with its decoding defaults, unless `decode` replaces them
        (`path`, the file it was read from, is named in errors)."""
        model, tokenizers = model_from_checkpoint(checkpoint, path)
        if decode is None:
            try:
                decode = saved_decode(checkpoint.config.get("decode", {}))
            except (AttributeError, UsageError) as e:
                raise CheckpointError(f"{path}: its decode settings do not fit this version of tfm: {e}") from None
        metadata = ModelMetadata(
            checkpoint.digest,
            checkpoint.model_description(),
            checkpoint.config,
            checkpoint.metrics,
            training=checkpoint.training if isinstance(checkpoint.training, dict) else {},
        )
        return cls(model.eval(), tokenizers, device, decode, dtype, metadata)

    def _search(self, sources: list[torch.Tensor], d: DecodeConfig) -> list[list[Hypothesis]]:
        src = pad_batch(sources, self.tokenizers.src.ids.pad).to(self.device)
        lengths = torch.tensor([len(s) for s in sources])
        limits = output_limits(lengths, d.max_len_a, d.max_len_b, cap=self.model.config.max_len)
        with autocast(self.device, self.dtype), eval_mode(self.model):
            return strategy_for(d).search(self.model, src, limits, d)

    def _search_near(
        self, sources: list[torch.Tensor], d: DecodeConfig, examples: list[list[Example]], near: NearSettings
    ) -> tuple[list[list[Hypothesis]], list[set[int]]]:
        if not self.reads_examples:  # e.g. an ensemble: without them
            return super()._search_near(sources, d, examples, near)
        src = pad_batch(sources, self.tokenizers.src.ids.pad).to(self.device)
        lengths = torch.tensor([len(s) for s in sources])
        limits = output_limits(lengths, d.max_len_a, d.max_len_b, cap=self.model.config.max_len)
        with autocast(self.device, self.dtype), eval_mode(self.model):
            ahead = self._keys_ahead(near.ahead)
            keys = [self._example_keys.of(line, ahead) for line in examples]
            decoder = NearMatchDecoder(self.model, Datastore.of(keys, self.device), near)
            return strategy_for(d).search(decoder, src, limits, d), decoder.consulted

    @property
    def reads_examples(self) -> bool:
        """Whether its model reads example pairs (a `FeatureDecoder`: near-matches)."""
        return isinstance(self.model, FeatureDecoder)

    def example_keys(self, pairs: list[tuple[str, str]]) -> list[Keys]:
        """Example pairs' keys as this model reads them (near.py; computed ahead by
        serving/near_keys_worker.py)."""
        with autocast(self.device, self.dtype), eval_mode(self.model):
            return self._example_keys.read(pairs)

    def _keys_ahead(self, store: str | None) -> KeysFile | None:
        """The keys computed ahead for this model in `store` (None: no store named)."""
        if store is None:
            return None
        folder = keys_folder(store, self.metadata.sha256)
        if self._ahead is None or self._ahead.folder != folder:
            self._ahead = KeysFile(folder)
        return self._ahead

    def _constrained(
        self, source: torch.Tensor, constraints: list[list[int]], d: DecodeConfig
    ) -> tuple[Translation, list[str]] | None:
        """Dynamic Beam Allocation (inference/constrained.py) at the decode settings' beam, and at
        least CONSTRAINED_BEAM: the beam is shared among hypotheses by the constraint tokens they
        have met, so a greedy decoder's beam of one has no room for it."""
        src = source[None].to(self.device)
        limits = output_limits(torch.tensor([len(source)]), d.max_len_a, d.max_len_b, cap=self.model.config.max_len)
        with autocast(self.device, self.dtype), eval_mode(self.model):
            found = constrained_beam_search(
                self.model, src, limits, constraints, max(d.beam_size, CONSTRAINED_BEAM), d.length_penalty
            )
        h = found.hypothesis
        why = [
            "" if i in found.placed else _UNPLACEABLE if i in found.unplaceable else _NO_ROOM
            for i in range(len(constraints))
        ]
        return Translation(self.tokenizers.tgt.decode(h.tokens), h.tokens, h.score), why

    def cross_attention(
        self, line: str, translation: Translation, recase: bool | None = None
    ) -> tuple[list[str], list[str], list[list[float]]]:
        [src], _ = self.encode_sources([line], recase)
        specials = self.tokenizers.tgt.ids
        tgt_in = torch.tensor([[specials.sos, *translation.tokens]])
        with torch.inference_mode(), eval_mode(self.model):
            weights = self.model.cross_attention(src[None].to(self.device), tgt_in.to(self.device))
        src_tokens = self.tokenizers.src.id_to_token(src.tolist())
        tgt_tokens = self.tokenizers.tgt.id_to_token([*translation.tokens, specials.eos])
        return src_tokens, tgt_tokens, weights[0].mean(0).float().cpu().tolist()  # [tgt_len][src_len]

    def corpus_nll(self, split: TokenPairs, check_stop: Callable[[], None] | None = None) -> tuple[float, int]:
        nll, tokens = corpus_nll(
            self.model, split, self.device, self.dtype, max_positions=self.model.config.max_len, check_stop=check_stop
        )
        return float(nll), int(tokens)
