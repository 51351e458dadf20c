"""The config schema shown to people: `tfm config` and docs/config.md, from the fields' metadata.

Every field of the schema (config.py) carries its help text, bounds and whether it is
resumable; this module only renders them, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal, get_args, get_origin, get_type_hints

from .config import Config
from .config_values import split_optional
from .records import field_default

MARKDOWN_BAR = " \\| "  # a | inside a Markdown table cell


def _type_text(tp: Any, bar: str = " | ") -> str:
    optional, inner = split_optional(tp)
    if optional:
        return f"{_type_text(inner, bar)} or null"
    if get_origin(tp) is Literal:
        return bar.join(str(a) for a in get_args(tp))
    if get_origin(tp) is list:
        return f"list of {_type_text(get_args(tp)[0], bar)}"
    if get_origin(tp) is dict:
        return "mapping"
    return {int: "integer", float: "number", bool: "true/false", str: "text"}.get(tp, str(tp))


def _bounds_text(meta: Any) -> str:
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{symbols[k]} {meta[k]:g}" for k in ("ge", "gt", "le", "lt")
                     if meta.get(k) is not None)


def _value_text(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _rows(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field, Any]]:
    """(dotted key, field, type) of every leaf field of a section, depth first."""
    hints = get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            rows += _rows(hints[f.name], f"{prefix}{f.name}.")
        else:
            rows.append((prefix + f.name, f, hints[f.name]))
    return rows


def _lookup(cfg: Config, key: str) -> Any:
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


def describe(cfg: Config) -> str:
    """A resolved config, key by key, with each key's help, type, bounds and default."""
    lines = []
    for key, f, tp in _rows(Config):
        value, default = _lookup(cfg, key), field_default(f)
        notes = [_type_text(tp)]
        if _bounds_text(f.metadata):
            notes.append(_bounds_text(f.metadata))
        notes.append(f"default {_value_text(default)}" if value != default else "default")
        if f.metadata.get("resumable"):
            notes.append("resumable")
        lines.append(f"{key} = {_value_text(value)}")
        lines.append(f"    {f.metadata.get('help', '')} [{'; '.join(notes)}]")
    return "\n".join(lines)


def schema_markdown() -> str:
    """docs/config.md: one table per section."""
    out = ["# Config reference", "",
           "Generated from the schema in `transformer_cli/config.py` by "
           "`tfm config --markdown > docs/config.md` (a test checks that it is current). "
           "`tfm config -c CFG [--set ...]` prints a config resolved, with these notes beside "
           "each value. *Resumable* train keys may change between sessions of a run without "
           "starting it over.", ""]
    hints = get_type_hints(Config)
    top = [f for f in dataclasses.fields(Config) if not dataclasses.is_dataclass(hints[f.name])]
    for f in top:
        out.append(f"`{f.name}` ({_type_text(hints[f.name])}, default `{field_default(f)}`): "
                   f"{f.metadata.get('help', '')}")
    for f in dataclasses.fields(Config):
        section = hints[f.name]
        if not (isinstance(section, type) and dataclasses.is_dataclass(section)):
            continue
        out += ["", f"## `{f.name}`: {f.metadata.get('help', '')}", "",
                (section.__doc__ or "").strip().replace("\n    ", " "), "",
                "| key | type | default | bounds | help |", "|---|---|---|---|---|"]
        for key, field_, tp in _rows(section, f"{f.name}."):
            help_text = field_.metadata.get("help", "")
            if field_.metadata.get("resumable"):
                help_text += " *Resumable.*"
            out.append(f"| `{key}` | {_type_text(tp, MARKDOWN_BAR)} | `{_value_text(field_default(field_))}` | "
                       f"{_bounds_text(field_.metadata)} | {help_text} |")
    return "\n".join(out) + "\n"
