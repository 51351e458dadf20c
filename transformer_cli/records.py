"""Typed records of the JSON files tfm writes and reads back (a preprocessed folder's manifest,
an export's manifest, the lines of metrics.jsonl): one dataclass each, read by `from_json`,
which checks every field's type, so readers use attributes instead of keys and a malformed
file is one error naming the field.

A field with a default may be missing from the file (a key added after files were written);
keys the dataclass does not name are ignored (a file written by a newer tfm still reads).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

R = TypeVar("R")


class RecordError(ValueError):
    """A JSON record that does not hold what its dataclass says (the field is named)."""


_HINTS: dict[type, dict[str, Any]] = {}


def type_hints(cls: type) -> dict[str, Any]:
    """The fields' types of a dataclass, evaluated once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def field_default(f: dataclasses.Field[Any]) -> Any:
    """The value a dataclass field takes when it is not given (a fresh one from its factory)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def from_json(cls: type[R], raw: object, what: str) -> R:
    """`raw` (parsed JSON) as a `cls` record; `what` names it in errors ("manifest.json")."""
    if not isinstance(raw, dict):
        raise RecordError(f"{what} is not a JSON object")
    hints = type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in raw:
            values[f.name] = _value(raw[f.name], hints[f.name], f"{what}: {f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(f"{what} has no {f.name}")
    return cls(**values)


def to_json(record: Any) -> dict[str, Any]:
    """The record as plain JSON data (nested records too); fields that are None are left out
    (a reader defaults them)."""
    return {k: v for k, v in dataclasses.asdict(record).items() if v is not None}


def _value(value: Any, tp: Any, where: str) -> Any:
    """`value` checked against the type `tp` (nested records and containers converted)."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        for arm in args:
            try:
                return _value(value, arm, where)
            except RecordError:
                continue
        raise RecordError(f"{where} has the wrong type ({type(value).__name__})")
    if tp is type(None):
        if value is None:
            return None
    elif dataclasses.is_dataclass(tp):
        return from_json(tp, value, where)  # type: ignore[arg-type]
    elif origin is dict and isinstance(value, dict):
        return {k: _value(v, args[1], f"{where}.{k}") for k, v in value.items()}
    elif origin is list and isinstance(value, list):
        return [_value(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is tuple and isinstance(value, list) and len(value) == len(args):
        return tuple(_value(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    elif tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    elif tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    elif tp in (str, bool) and isinstance(value, tp):
        return value
    raise RecordError(f"{where} has the wrong type ({type(value).__name__})")
