"""The config schema shown to people: `tfm config` and docs/config.md, from the fields' metadata.

Every field of the schema (config.py) carries its help text, bounds and whether it is
resumable; this module only renders them, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import json
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from .config import Config
from .config_values import lookup, split_optional
from .records import field_default
from .seams import ARCHITECTURES, CHOSEN_BY_CONFIG, TFM, choices

MARKDOWN_BAR = " \\| "  # a | inside a Markdown table cell


def _type_text(tp: Any, bar: str = " | ") -> str:
    optional, inner = split_optional(tp)
    if optional:
        return f"{_type_text(inner, bar)} or null"
    if get_origin(tp) in (Union, types.UnionType):
        parts = [_type_text(a, bar) for a in get_args(tp) if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in get_args(tp) else "")
    if get_origin(tp) is Literal:
        return bar.join(str(a) for a in get_args(tp))
    if get_origin(tp) is list:
        return f"list of {_type_text(get_args(tp)[0], bar)}"
    if get_origin(tp) is dict:
        return "mapping"
    return {int: "integer", float: "number", bool: "true/false", str: "text"}.get(tp, str(tp))


def _bounds_text(meta: Any) -> str:
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{symbols[k]} {meta[k]:g}" for k in ("ge", "gt", "le", "lt") if meta.get(k) is not None)


def _value_text(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _rows(section: Any, prefix: str = "") -> list[tuple[str, dataclasses.Field[Any], Any]]:
    """(dotted key, field, type) of every leaf field of a section, depth first: of the section
    as it is (the `model:` section: its architecture's keys), or as it is by default (a class)."""
    if isinstance(section, type):
        section = section()
    hints = get_type_hints(type(section))
    rows = []
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            rows += _rows(value, f"{prefix}{f.name}.")
        else:
            rows.append((prefix + f.name, f, hints[f.name]))
    return rows


def describe(cfg: Config) -> str:
    """A resolved config, key by key, with each key's help, type, bounds and default; an
    options mapping as the chosen entry's settings, key by key (train.optimizer_options.betas)."""
    chosen = _chosen_settings(cfg)
    lines = []
    for key, f, tp in _rows(cfg):
        if key not in chosen:
            lines += _described(key, lookup(cfg, key), f, tp)
            continue
        for prefix, settings in chosen[key]:
            for sub_key, sub_f, sub_tp in _rows(settings, f"{prefix}."):
                lines += _described(sub_key, getattr(settings, sub_f.name), sub_f, sub_tp)
    return "\n".join(lines)


def _described(key: str, value: Any, f: dataclasses.Field[Any], tp: Any) -> list[str]:
    default = field_default(f)
    notes = [_type_text(tp)]
    if _bounds_text(f.metadata):
        notes.append(_bounds_text(f.metadata))
    notes.append(f"default {_value_text(default)}" if value != default else "default")
    if f.metadata.get("resumable"):
        notes.append("resumable")
    return [f"{key} = {_value_text(value)}", f"    {f.metadata.get('help', '')} [{'; '.join(notes)}]"]


def _chosen_settings(cfg: Config) -> dict[str, list[tuple[str, Any]]]:
    """options key -> (the key its settings go under, the settings read) of each chosen entry
    that has settings: one for train.optimizer_options, one per transform for
    train.transform_options (the architecture's are the model section itself)."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for choice in choices():
        if not choice.options_key:
            continue
        value, given = lookup(cfg, choice.key), lookup(cfg, choice.options_key)
        for name in value if isinstance(value, list) else [choice.entry(value)]:
            key = f"{choice.options_key}.{name}" if isinstance(value, list) else choice.options_key
            settings = choice.registry.options(name, given.get(name) if isinstance(value, list) else given, key)
            if settings is not None:
                out.setdefault(choice.options_key, []).append((key, settings))
    return out


def schema_markdown() -> str:
    """docs/config.md: one table per section."""
    out = [
        "# Config reference",
        "",
        "Generated from the schema in `transformer_cli/config.py` (the `model:` section: the "
        "default architecture's settings, `transformer_cli/model/transformer_config.py`) by "
        "`tfm config --markdown > docs/config.md` (a test checks that it is current). "
        "`tfm config -c CFG [--set ...]` prints a config resolved, with these notes beside "
        "each value. *Resumable* train keys may change between sessions of a run without "
        "starting it over.",
        "",
    ]
    hints, defaults = get_type_hints(Config), Config()
    top = [f for f in dataclasses.fields(Config) if not dataclasses.is_dataclass(getattr(defaults, f.name))]
    for f in top:
        out.append(
            f"`{f.name}` ({_type_text(hints[f.name])}, default `{_value_text(field_default(f))}`): "
            f"{f.metadata.get('help', '')}"
        )
    for f in dataclasses.fields(Config):
        section = getattr(defaults, f.name)
        if not dataclasses.is_dataclass(section):
            continue
        out += [
            "",
            f"## `{f.name}`: {f.metadata.get('help', '')}",
            "",
            (type(section).__doc__ or "").strip().replace("\n    ", " "),
            "",
            "| key | type | default | bounds | help |",
            "|---|---|---|---|---|",
        ]
        for key, field_, tp in _rows(section, f"{f.name}."):
            help_text = field_.metadata.get("help", "")
            if field_.metadata.get("resumable"):
                help_text += " *Resumable.*"
            out.append(_markdown_row(key, field_, tp, help_text))
    return "\n".join(out + _entries_markdown()) + "\n"


def _markdown_row(key: str, f: dataclasses.Field[Any], tp: Any, help_text: str) -> str:
    return (
        f"| `{key}` | {_type_text(tp, MARKDOWN_BAR)} | `{_value_text(field_default(f))}` | "
        f"{_bounds_text(f.metadata)} | {help_text} |"
    )


def _entries_markdown() -> list[str]:
    """The settings of tfm's own entries, under the options key that holds them (a plugin's
    entries document their own)."""
    out = [
        "",
        "## Settings of tfm's own entries",
        "",
        "Each entry a config chooses by name reads its own keys from the options mapping beside "
        "its name (`train.optimizer` → `train.optimizer_options`). The keys these moved from "
        "(`train.betas`, `train.warmup_steps`, `train.label_smoothing`, `train.source_lowercase`, "
        "...) are still read, each with a warning naming its new key.",
    ]
    defaults = Config()
    for registry in CHOSEN_BY_CONFIG:
        by_settings: dict[type, list[str]] = {}
        for name in registry.names():
            settings = registry.settings_of(name) if registry.options_key and registry is not ARCHITECTURES else None
            if settings is not None and registry.provider(name).startswith(TFM):
                by_settings.setdefault(settings, []).append(name)
        for settings, names in by_settings.items():
            many = isinstance(lookup(defaults, registry.key), list)  # options by entry name
            prefix = f"{registry.options_key}.{names[0]}" if many else registry.options_key
            out += ["", f"### `{registry.key}`: {', '.join(names)}", "", " ".join((settings.__doc__ or "").split())]
            out += ["", "| key | type | default | bounds | help |", "|---|---|---|---|---|"]
            hints = get_type_hints(settings)
            for f in dataclasses.fields(settings):
                out.append(_markdown_row(f"{prefix}.{f.name}", f, hints[f.name], f.metadata.get("help", "")))
    return out
