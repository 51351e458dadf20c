"""The `corrections:` section of the schema: translations corrected by their users, posted to
`tfm serve` or added from files (transformer_cli/corrections/), answered from memory at once
and trained on by the next run of the config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .config_values import Section
from .config_values import schema_field as _f
from .config_values import schema_section as _section


@dataclass
class NearMatchesConfig(Section):
    """Near-matches: a line close to accepted corrections (not equal) is decoded with them
    (corrections/nearby.py finds them, inference/near.py mixes them in: docs/corrections.md)."""

    SECTION: ClassVar[str] = "corrections.near_matches"

    corrections: int = _f(
        8,
        "tfm serve decodes a line with at most this many accepted corrections whose sources are closest "
        "to it (0: near-matches off; lines are decoded by the model alone).",
        ge=0,
        le=256,
    )
    similarity: float = _f(
        0.2,
        "The least similarity of a near-match: the rarity-weighted share of the words the line and the "
        "correction's source have between them that both have (1: the same words).",
        ge=0.0,
        le=1.0,
    )
    neighbours: int = _f(8, "Decoder states of the corrections each decoding step reads (k).", ge=1, le=256)
    weight: float = _f(
        0.6, "The most the corrections' next-token distribution is given against the model's.", ge=0.0, le=1.0
    )
    doubt: float = _f(
        0.5,
        "The corrections' share is multiplied by (1 - the model's top next-token probability) to this "
        "power: they weigh less where the model is sure (0: as much wherever they are near).",
        ge=0.0,
        le=10.0,
    )
    reach: float = _f(
        1000.0,
        "The squared distance between decoder states at which a correction's share falls to 0 "
        "(a step far from every correction's is decoded by the model alone).",
        ge=0.0,
    )
    temperature: float = _f(100.0, "Of the softmax over the neighbours' negative squared distances.", ge=1e-3)
    ahead: bool = _f(
        True,
        "tfm serve computes each accepted correction's decoder states for the served model ahead, in a "
        "process of its own at the lowest CPU priority, into <store>/near-keys/ (float16; about 15 KB a "
        "correction for base.yaml's model): a line's near-matches are then looked up, not read by the "
        "model while it waits (false: read when first needed, and kept for the 8,192 last used).",
        added=True,
    )


@dataclass
class CorrectionsConfig(Section):
    """Users' corrections: where they are kept, how they are guarded, how much they weigh."""

    SECTION: ClassVar[str] = "corrections"

    store: str | None = _f(
        None,
        "The folder corrections are kept in (shared by tfm serve, tfm feedback and training); "
        "null: corrections are off (tfm serve has no POST /corrections).",
    )
    weight: int = _f(
        4, "Each accepted correction stands this many times in an epoch of the next training run.", ge=0, le=1000
    )
    glossary_weight: int = _f(
        0,
        "Each term of decode.glossary and of the store (terms.jsonl), as a pair of its own (source "
        "term, target term), stands this "
        "many times in an epoch of the next training run, so the model learns it and decoding "
        "again under constraints is needed less (0: the terms are honoured at decode time only).",
        ge=0,
        le=1000,
        added=True,
    )
    transforms: list[str] | None = _f(
        None,
        "Of train.transforms, those applied to the corrections' sources when batches are drawn "
        "(null: all of them; []: none, the corrections as their translators wrote them).",
        added=True,
    )
    memory: bool = _f(
        True, "tfm serve answers a source equal to an accepted correction's (spaces aside) with the correction."
    )
    near_matches: NearMatchesConfig = _section(
        NearMatchesConfig, "A line close to accepted corrections, not equal, is decoded with their help."
    )
    max_bytes: int = _f(16384, "A correction request's body size in bytes (more: 413).", ge=64, le=1 << 24)
    per_minute: int = _f(
        30,
        "Corrections one caller (its network address) may post to tfm serve a minute (more: 429).",
        ge=1,
        le=1_000_000,
    )
    per_client_per_day: int = _f(
        500,
        "Corrections of one caller (a network address, the local user: not the client a correction names) "
        "accepted a day (UTC); later ones are held for review.",
        ge=0,
        le=10_000_000,
    )
    max_length_ratio: float = _f(
        3.0, "Held when one side is this many times longer than the other (in characters).", ge=1.0, le=1000.0
    )
    same_language: bool = _f(
        True,
        "Held when the corrected translation shares more of its letter trigrams with the source than with "
        "the output it corrects: the source's language, not a translation (measured on validation: 3 of 946 "
        "references held, each restoring names the output had lost).",
        added=True,
    )
    same_script: bool = _f(
        True, "Held when the corrected translation is mostly written in another script than the output it corrects."
    )
    max_unk_rate: float = _f(
        0.2,
        "Held when more of the corrected translation's tokens than this are unknown to the model.",
        ge=0.0,
        le=1.0,
    )
    compact_over: float | None = _f(
        2.0,
        "A run preparing the config's data (the nightly tfm train) compacts the store's logs (as tfm "
        "feedback compact does) when one holds this many times more lines than it would compacted "
        "(records written again, decisions) and 1,000 lines or more, so servers and nights starting on "
        "it read less (null: only tfm feedback compact).",
        ge=1.0,
        added=True,
    )
    served_per_day: int = _f(
        0,
        "Opt-in self-training: tfm serve keeps up to this many distinct sources it translated a day "
        "(UTC) in <store>/served.<src>, text a config's synthetic.forward_translation.text can name; 0: none.",
        ge=0,
        le=10_000_000,
    )
