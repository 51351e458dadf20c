"""The `synthetic:` section of the schema: training pairs made from monolingual text
(transformer_cli/synthetic/). Back-translation turns target-language text into pairs with a
reverse model's translations as sources (Sennrich et al. 2016); forward translation turns
source-language text into pairs with a model's (or an ensemble's) translations as targets.
Both are mixed with the config's real pairs when batches are drawn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .config_values import Section
from .config_values import schema_field as _f
from .config_values import schema_section as _section

NOISED_BEAM = "noised_beam"  # synthetic.back_translation.search: beam search, then noise


TEXT_HELP = (
    "monolingual text: corpus names (multi30k-task2), files or folders of text (every "
    "*.{lang} and *.{lang}.gz file in them), or `parallel` (the config's own training "
    "corpus, that side); empty: none."
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

    text: list[str] = _f([], "Target-language " + TEXT_HELP)
    model: str = _f(
        "reverse",
        "The reverse model: `reverse` (this config's reverse run, trained "
        "by `tfm train -c CFG --reverse`), or a checkpoint.",
    )
    search: str = _f(
        "sample",
        "The search that makes the synthetic sources: a decode.strategy (greedy, beam, sample: one "
        "draw from the model's distribution, sampling_topk and sampling_temperature; or a "
        "plugin's, with decode.strategy_options), or noised_beam: beam, then words dropped, "
        "blanked and swapped (Edunov et al. 2018).",
    )
    beam_size: int = _f(5, "beam and noised_beam: the beam.", ge=1, le=256)
    sampling_topk: int = _f(0, "sample: from the k most likely tokens (0: all).", ge=0, le=1_000_000)
    sampling_temperature: float = _f(1.0, "sample: below 1 sharpens, above 1 flattens.", gt=0.0, le=100.0)
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
    that needs them; resumable, and each line translated once per model and search."""

    SECTION: ClassVar[str] = "synthetic"

    back_translation: BackTranslationConfig = _section(BackTranslationConfig, "Back-translation.")
    forward_translation: ForwardTranslationConfig = _section(ForwardTranslationConfig, "Forward translation.")
    reverse_recipe: str | None = _f(
        None,
        "The config whose tokenizer, model and train sections the "
        "reverse run (--reverse) takes, e.g. base.yaml: a recipe for the "
        "real pairs alone; null: this config's own.",
    )
    real_upsample: int = _f(
        1,
        "Each real pair appears this many times in an epoch, beside each synthetic pair once "
        "(0: synthetic pairs only, as a distilled student); mixed when batches are drawn: a "
        "change encodes nothing again.",
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

    @property
    def enabled(self) -> bool:
        return bool(self.back_translation.text or self.forward_translation.text)
