"""`distill:`, read until a later release: sequence-level knowledge distillation (Kim & Rush
2016) is forward translation of the training sources by the teachers, so a config's `distill:`
section (after its `extends:` chain, with its `--set distill.*`) is rewritten into those keys
when the config is loaded, with one warning naming where it was given and the keys to write:

    distill.teachers       synthetic.forward_translation.teachers, and .text: [parallel]
    distill.beam_size      synthetic.forward_translation.beam_size
    distill.combine        synthetic.forward_translation.combine
    distill.weights        synthetic.forward_translation.weights
    distill.batch_size     synthetic.batch_size
    distill.chunk_lines    synthetic.chunk_lines (its default too, 1000: not synthetic's)
    distill.keep_original  synthetic.real_weight: 1 (true) or 0 (false, its default)

The translations are those `distill:` made (the same translation cache and lineage: the same
search); the part they make is forward_translation, no longer distillation. A new key that the
config gives beside `distill:`, at other than its default, is refused, naming both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import yaml

from .config_synthetic import PARALLEL, SyntheticConfig
from .config_values import ConfigError, Section, apply_override, build_section, lookup
from .config_values import schema_field as _f

log = logging.getLogger("tfm")

OLD = "distill"
FORWARD = "synthetic.forward_translation"
NEW_KEYS = {  # distill's keys -> the keys they are now
    "teachers": f"{FORWARD}.teachers",
    "beam_size": f"{FORWARD}.beam_size",
    "combine": f"{FORWARD}.combine",
    "weights": f"{FORWARD}.weights",
    "batch_size": "synthetic.batch_size",
    "chunk_lines": "synthetic.chunk_lines",
    "keep_original": "synthetic.real_weight",
}


@dataclass
class DistillConfig(Section):
    """The `distill:` section as it was: each key's type and bounds, checked as they were."""

    SECTION: ClassVar[str] = OLD

    teachers: list[str] = _f([], "Teacher models; empty: no distillation.")
    beam_size: int = _f(5, "The teachers' beam.", ge=1, le=256)
    combine: Literal["log", "prob"] = _f("log", "How several teachers combine.")
    weights: list[float] | None = _f(None, "One weight per teacher (null: equal).")
    keep_original: bool = _f(False, "Train on the original pairs as well.")
    batch_size: int = _f(128, "Sentences the teachers decode together.", ge=1, le=100_000)
    chunk_lines: int = _f(1000, "Sources translated, then saved, at a time.", ge=1, le=10_000_000)


def expand_distill(raw: dict[str, Any], origins: dict[str, str], overrides: list[str]) -> list[str]:
    """Rewrite the `distill:` section of a config's resolved mapping `raw` and its `--set
    distill.*` (of `overrides`) into the keys they are now, noting in `origins` (dotted key ->
    where it was given) that each was given where its old key was; returns the other overrides.
    A problem is a ConfigError holding the keys (the loader names where each was given)."""
    section, places, rest = _given(raw, origins, overrides)
    if section is None:
        return rest
    distill: DistillConfig = build_section(DistillConfig, section, OLD)
    if not distill.teachers:
        log.warning("warning: %s: %s is ignored: it names no teachers (drop it)", ", ".join(places), OLD)
        return rest
    written = []
    for old, key, value in _new_values(distill, set(section)):
        _put(raw, key, value, old, set(section))
        origins[key] = origins.get(old) or places[0]
        written.append(f"{key}: {_flow(value)}")
    log.warning(
        "warning: %s: %s is now forward translation of the training sources: write %s "
        "(the old name is read until a later release)",
        ", ".join(places),
        OLD,
        ", ".join(written),
    )
    return rest


def _given(
    raw: dict[str, Any], origins: dict[str, str], overrides: list[str]
) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """The distill section as given (None: none), with its --set applied; where it was given
    (its line, then each --set); and the overrides of other keys."""
    present = OLD in raw
    section = raw.pop(OLD, None)
    if present and section is None:  # `distill:` with no keys
        section = {}
    places = [origins[OLD]] if OLD in origins else []
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"{OLD} must be a mapping (got {section!r})", OLD)
    rest = []
    for assignment in overrides:
        if not assignment.strip().startswith(f"{OLD}."):
            rest.append(assignment)
            continue
        holder = {OLD: dict(section or {})}
        where = f"--set {assignment.strip()}"
        origins[apply_override(holder, assignment)] = where
        section = holder[OLD]
        places.append(where)
    return section, places, rest


def _new_values(distill: DistillConfig, given: set[str]) -> list[tuple[str, str, Any]]:
    """(old key, new key, value) for each new key the section sets: the text (of `distill`
    itself), the keys given, and those whose default is not the new key's (chunk_lines,
    keep_original)."""
    out: list[tuple[str, str, Any]] = [(OLD, f"{FORWARD}.text", [PARALLEL])]
    for name, key in NEW_KEYS.items():
        value = getattr(distill, name)
        if name == "keep_original":  # the real pairs once, or not at all
            value = 1 if value else 0
        if name in given or value != _default(key):
            out.append((f"{OLD}.{name}", key, value))
    return out


def _put(raw: dict[str, Any], key: str, value: Any, old: str, given: set[str]) -> None:
    """`value` at dotted `key` of `raw`; a value given there too (not the key's default) is
    refused, naming both keys."""
    *path, last = key.split(".")
    mapping = raw
    for part in path:
        if mapping.get(part) is None:
            mapping[part] = {}
        mapping = mapping[part]
        if not isinstance(mapping, dict):
            return  # not a mapping: the schema's check names it
    if last in mapping and mapping[last] != _default(key):
        if old.removeprefix(f"{OLD}.") in given:
            raise ConfigError(f"{old} is the old name of {key}: give {key} alone", old, key)
        raise ConfigError(f"{OLD} is the old name of {key} (here {_flow(value)}): give {key} alone", key, OLD)
    mapping[last] = value


def _default(key: str) -> Any:
    """The default of a `synthetic.*` key."""
    return lookup(SyntheticConfig(), key.removeprefix("synthetic."))


def _flow(value: Any) -> str:
    """A value as YAML writes it on one line: [parallel], 4, null."""
    return yaml.safe_dump(value, default_flow_style=True, width=1_000_000).replace("\n...\n", "").strip()
