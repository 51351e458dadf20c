"""The `synthetic:` section of the schema: training pairs made from monolingual text
(transformer_cli/synthetic/). Back-translation turns target-language text into pairs with a
reverse model's translations as sources (Sennrich et al. 2016); forward translation turns
source-language text into pairs with a model's (or an ensemble's) translations as targets.
Both are mixed with the config's real pairs when batches are drawn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .config_values import Moved, Section
from .config_values import schema_field as _f
from .config_values import schema_section as _section

NOISED_BEAM = "noised_beam"  # synthetic.back_translation.search: beam search, then noise
PARALLEL = "parallel"  # synthetic.*.text: the config's own training corpus (synthetic/corpora.py)


TEXT_HELP = (
    "monolingual text: corpus names (multi30k-task2), files or folders of text (every "
    "*.{lang} and *.{lang}.gz file in them, one per stem), or `parallel` (the config's own "
    "training corpus, that side); empty: none."
)

TRANSFORMS_HELP = (  # a source's own share of the batch transforms (training/mix_plan.py)
    "Of train.transforms, those applied to these pairs when batches are drawn (null: all of them; []: none)."
)
WEIGHT_HELP = (  # a direction's weight in the training mix (training/mix_plan.py)
    "Each of these pairs appears this many times in an epoch (0: made, not trained on); mixed "
    "when batches are drawn: a change encodes nothing again."
)


@dataclass
class BackTranslationConfig(Section):
    """Target-language text translated into synthetic sources by a reverse model."""

    SECTION: ClassVar[str] = "synthetic.back_translation"
    MOVED: ClassVar[dict[str, Moved]] = {  # read, with a warning, until removed
        "sampling_topk": Moved("search_options.topk", 0),
        "sampling_temperature": Moved("search_options.temperature", 1.0),
    }

    text: list[str] = _f([], "Target-language " + TEXT_HELP)
    model: str = _f(
        "reverse",
        "The reverse model: `reverse` (this config's reverse run, trained "
        "by `tfm train -c CFG --reverse`), or a checkpoint.",
    )
    search: str = _f(
        "sample",
        "The search that makes the synthetic sources: a search strategy, as decode.strategy "
        "(seams.SEARCH_STRATEGIES: greedy, beam, sample: one draw from the model's distribution, "
        "or one registered by a plugin), or noised_beam: beam, then words dropped, blanked and "
        "swapped (Edunov et al. 2018).",
    )
    search_options: dict[str, Any] = _f(
        {},
        "The search's own settings, as decode.strategy_options (sample: topk, temperature; its "
        "seed is synthetic.seed).",
        added=True,
    )
    beam_size: int = _f(5, "The beam of beam, noised_beam and a plugin's search (greedy, sample: 1).", ge=1, le=256)
    tag: bool = _f(
        True,
        "Mark synthetic sources with a tag token the model learns to tell them "
        "by (Caswell et al. 2019), put in front when batches are drawn; users' input never carries it.",
    )
    max_lines: int | None = _f(None, "Use at most the first N lines of the text (after cleaning).", ge=1)
    weight: int = _f(1, WEIGHT_HELP, ge=0, le=1000, added=True)
    transforms: list[str] | None = _f(None, TRANSFORMS_HELP, added=True)


@dataclass
class ForwardTranslationConfig(Section):
    """Source-language text translated into synthetic targets by a model or an ensemble."""

    SECTION: ClassVar[str] = "synthetic.forward_translation"

    text: list[str] = _f([], "Source-language " + TEXT_HELP)
    teachers: list[str] = _f([], "The models that translate it (several: an ensemble).")
    weights: list[float] | None = _f(None, "One weight per teacher (null: equal).")
    combine: Literal["log", "prob"] = _f("log", "How several teachers combine.")
    beam_size: int = _f(5, "The teachers' beam.", ge=1, le=256)
    tag: bool = _f(False, "Mark these pairs' sources with their own tag token.")
    max_lines: int | None = _f(None, "Use at most the first N lines of the text (after cleaning).", ge=1)
    weight: int = _f(1, WEIGHT_HELP, ge=0, le=1000, added=True)
    transforms: list[str] | None = _f(None, TRANSFORMS_HELP, added=True)


@dataclass
class SyntheticConfig(Section):
    """Pairs made from monolingual text, trained on together with the real pairs
    (transformer_cli/synthetic/): `tfm synthesize`, or the first `tfm preprocess`/`tfm train`
    that needs them; resumable, and each line translated once per model and search. A
    `distill:` section (of earlier versions) reads as forward translation of `parallel` by its
    teachers, with a warning naming the keys to write (config_distill.py)."""

    SECTION: ClassVar[str] = "synthetic"
    MOVED: ClassVar[dict[str, Moved]] = {"real_upsample": Moved("real_weight", 1)}  # read, with a warning

    back_translation: BackTranslationConfig = _section(BackTranslationConfig, "Back-translation.")
    forward_translation: ForwardTranslationConfig = _section(ForwardTranslationConfig, "Forward translation.")
    reverse_recipe: str | None = _f(
        None,
        "The config whose tokenizer, model and train sections the "
        "reverse run (--reverse) takes, e.g. base.yaml: a recipe for the "
        "real pairs alone; null: this config's own.",
    )
    real_weight: int = _f(
        1,
        "The real pairs' weight: each appears this many times in an epoch, beside the synthetic "
        "pairs by their own (0: the synthetic pairs only; with forward_translation.text [parallel], "
        "a student distilled from its teachers, Kim & Rush 2016); mixed when batches are drawn: a "
        "change encodes nothing again. Formerly real_upsample.",
        ge=0,
        le=1000,
    )
    chunk_lines: int = _f(
        2000, "Lines translated, then saved, at a time: where a stopped translation resumes.", ge=1, le=10_000_000
    )
    batch_size: int = _f(128, "Sentences translated together.", ge=1, le=100_000)
    seed: int = _f(1, "Seed of the sampled and noised translations (one draw per chunk).")
    cache_dir: str = _f(
        "data/synthetic-cache",
        "Where translations are kept by line, per model and search: a later run translates only lines it has not seen.",
    )

    republished: Literal["keep", "retranslate"] = _f(
        "keep",
        "When a model that translates text is replaced at the same path (a re-published "
        "teacher, a retrained reverse model): keep the earlier translations of the lines it "
        "translated, refreshing a share of them each time (refresh_share), unless the new model "
        "improved on validation by republished_margin (then every line again); `retranslate`: "
        "every line again at once.",
        added=True,
    )
    republished_margin: float = _f(
        1.0,
        "keep: validation BLEU (train.valid_bleu, as the checkpoints record it) by which a "
        "replaced model must improve for every line to be translated again.",
        ge=0.0,
        le=100.0,
        added=True,
    )
    refresh_share: float = _f(
        0.05,
        "keep: the share of the earlier translations that each new version of a model "
        "translates again (a different share each version; 0: none).",
        ge=0.0,
        le=1.0,
        added=True,
    )
    prune_lineage: bool = _f(
        True,
        "When a replaced model adds a version, delete the caches of its earlier versions that no "
        "run can read again (older than the round(1 / refresh_share) before the newest with keep, "
        "all but the newest with retranslate; kept while another lineage reads one or a process "
        "has it open), so the cache stays bounded; false: keep them all (a run with false also "
        "keeps its lineages' caches from others' pruning).",
        added=True,
    )

    @property
    def enabled(self) -> bool:
        return bool(self.back_translation.text or self.forward_translation.text)
