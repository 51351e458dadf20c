"""What a run trains on, declared once: the config's sources of pairs, each with its weight (the
times it stands in an epoch) and its source marks, in corpus order:

    train               the corpus's real pairs: synthetic.real_weight times when the config
                        makes pairs by translating text, else once
    back_translation    synthetic.back_translation.weight; its tag (Prefix) when `tag`, its
                        word noise (WordNoise) with search `noised_beam`
    forward_translation synthetic.forward_translation.weight; its tag when `tag`
    corrections         the store's accepted corrections, corrections.weight
    glossary            the terms of decode.glossary and of the config's store, a pair each,
                        corrections.glossary_weight

`mix_plan(cfg)` builds it from the config alone (no model or data is opened), and everything
that depends on the mix reads it: the batches (`MixPlan.split`, data/mixed.py), the run's
identity (`MixPlan.identity`), the log line (`MixPlan.describe`) and the marks the vocabulary
reserves (`MixPlan.specials`: exactly those of the marks in use, so a config whose only
part is its corrections reserves none, and its first correction changes no fingerprint).
A source whose part the prepared folder lacks (no accepted correction yet) stands for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Config
from ..config_synthetic import NOISED_BEAM
from ..corrections.glossary_part import PART as GLOSSARY
from ..corrections.training import PART
from ..data.mixed import MixedSplit, Source
from ..data.prepared import Prepared
from ..data.shards import ShardedSplit
from ..errors import UsageError
from ..tokenizers.text_marks import BACK_TRANSLATION_TAG, FILLER, FORWARD_TRANSLATION_TAG

REAL = "train"


class SourceMark(Protocol):
    """Something done to a source's pairs that may need tokens of its own (not a train.transforms
    entry, seams.Transform: those are applied to batches)."""

    def specials(self) -> tuple[str, ...]:
        """The marks it writes into the text: the vocabulary reserves each as one token."""
        ...


@dataclass(frozen=True)
class Prefix:
    """A mark put in front of each of the source's sources as batches are drawn (a tag:
    Caswell et al. 2019)."""

    mark: str

    def specials(self) -> tuple[str, ...]:
        return (self.mark,)


@dataclass(frozen=True)
class WordNoise:
    """Words dropped, blanked (the filler mark) and swapped in back-translations when they are
    made (synthetic/noise.py; Edunov et al. 2018)."""

    def specials(self) -> tuple[str, ...]:
        return (FILLER,)


@dataclass(frozen=True)
class PlannedSource:
    """One source of the mix: its part's name, its weight and its marks."""

    name: str
    weight: int
    marks: tuple[SourceMark, ...] = ()
    batch: tuple[str, ...] | None = None  # the train.transforms its pairs get (None: all of them)

    @property
    def tag(self) -> str | None:
        return next((t.mark for t in self.marks if isinstance(t, Prefix)), None)


@dataclass(frozen=True)
class MixPlan:
    """The sources a config trains on (see the module docstring)."""

    sources: tuple[PlannedSource, ...]

    def specials(self) -> tuple[str, ...]:
        """The tokens the marks in use write, each once, in the order they are declared."""
        return tuple(dict.fromkeys(m for s in self.sources for t in s.marks for m in t.specials()))

    def batch_transforms(self) -> dict[str, tuple[str, ...]]:
        """The sources that get only some of train.transforms, and those they get."""
        return {s.name: s.batch for s in self.sources if s.batch is not None}

    def present(self, prepared: Prepared) -> list[PlannedSource]:
        """The sources `prepared` has pairs for: the real pairs, and each source with a part."""
        return [s for s in self.sources if s.name == REAL or s.name in prepared.manifest.parts]

    def identity(self, prepared: Prepared) -> dict[str, Any]:
        """How the present sources are mixed, as a run's identity takes it (the real pairs and
        the corrections by weight, a direction by weight and tag)."""
        return {
            s.name: s.weight if s.name in (REAL, PART, GLOSSARY) else [s.weight, s.tag] for s in self.present(prepared)
        }

    def split(self, prepared: Prepared) -> ShardedSplit | MixedSplit:
        """The pairs of `prepared` this plan trains on: the corpus's training split alone when the
        folder has no part, else the mix of the present sources."""
        if not prepared.manifest.parts:
            return prepared.split(REAL)
        mixed = MixedSplit([_source(s, prepared) for s in self.present(prepared)])
        if not len(mixed):
            raise UsageError(f"nothing to train on: {self.describe(prepared)}")
        return mixed

    def describe(self, prepared: Prepared) -> str:
        """The mix as train.log says it: each present source's pairs, weight and tag."""
        return ", ".join(
            f"{len(prepared.split(s.name))} {s.name} pairs x{s.weight}{' (tagged)' if s.tag else ''}"
            for s in self.present(prepared)
        )


def _source(planned: PlannedSource, prepared: Prepared) -> Source:
    tag = planned.tag
    tag_ids = tuple(prepared.tokenizers.src.encode_batch([tag])[0]) if tag else ()
    return Source(planned.name, prepared.split(planned.name), planned.weight, tag, tag_ids)


def _names(transforms: list[str] | None) -> tuple[str, ...] | None:
    return None if transforms is None else tuple(transforms)


def mix_plan(cfg: Config) -> MixPlan:
    """`cfg`'s sources of pairs, from the config alone."""
    sources = [PlannedSource(REAL, cfg.synthetic.real_weight if cfg.synthetic.enabled else 1)]
    bt, ft = cfg.synthetic.back_translation, cfg.synthetic.forward_translation
    if bt.text:
        noise: tuple[SourceMark, ...] = (WordNoise(),) if bt.search == NOISED_BEAM else ()
        tag: tuple[SourceMark, ...] = (Prefix(BACK_TRANSLATION_TAG),) if bt.tag else ()
        sources.append(PlannedSource("back_translation", bt.weight, tag + noise, _names(bt.transforms)))
    if ft.text:
        tag = (Prefix(FORWARD_TRANSLATION_TAG),) if ft.tag else ()
        sources.append(PlannedSource("forward_translation", ft.weight, tag, _names(ft.transforms)))
    if cfg.corrections.store is not None:
        sources.append(PlannedSource(PART, cfg.corrections.weight, (), _names(cfg.corrections.transforms)))
    if (cfg.decode.glossary is not None or cfg.glossary_store is not None) and cfg.corrections.glossary_weight:
        sources.append(PlannedSource(GLOSSARY, cfg.corrections.glossary_weight))
    return MixPlan(tuple(sources))
