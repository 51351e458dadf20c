"""Turning YAML values into typed config fields: coercion, bounds, unknown keys, `--set`.

Generic over the schema's dataclasses (config.py): every problem is one ConfigError naming
the key, e.g. ``train.lr must be a finite number (got 'inf')``, and holding it in `keys` so
that the loader can say which file and line (or which --set) gave the value.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import math
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

import yaml

from .errors import UsageError
from .records import field_default, type_hints


class ConfigError(UsageError):
    """A bad key or value of a config; `keys` are the dotted keys it concerns, the culprit first
    (e.g. ("model.n_heads", "model.d_model") for a head count that does not divide the width)."""

    def __init__(self, message: str, *keys: str):
        super().__init__(message)
        self.keys = keys


# --------------------------------------------------------------------------- coercion


def _type_name(tp: Any) -> str:
    if get_origin(tp) in (Union, types.UnionType):
        names = [_type_name(a) for a in get_args(tp) if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in get_args(tp) else "")
    if get_origin(tp) is Literal:
        args = get_args(tp)
        return repr(args[0]) if len(args) == 1 else "one of " + ", ".join(repr(a) for a in args)
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def split_optional(tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return True, args[0]
    return False, tp


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Return `value` converted to type `tp`, or raise ConfigError naming `key`."""
    if tp is Any:  # a mapping of settings checked later, by the entry they belong to
        return value
    optional, inner = split_optional(tp)
    if optional:
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none", "~")):
            return None
        return _coerce(value, inner, key)
    if get_origin(tp) in (Union, types.UnionType):  # several types: the first that takes it
        for arg in get_args(tp):
            with contextlib.suppress(ConfigError):
                return _coerce(value, arg, key)
        raise ConfigError(f"{key} must be {_type_name(tp)} (got {value!r})", key)
    if tp is type(None):
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none", "~")):
            return None
        raise ConfigError(f"{key} must be null (got {value!r})", key)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build_section(tp, value, key)
    origin = get_origin(tp)
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise ConfigError(f"{key} must be {_type_name(tp)} (got {value!r})", key)
    if origin is list:
        (item,) = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list (got {value!r})", key)
        return [_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping (got {value!r})", key)
        item = get_args(tp)[1]
        return {str(k): _coerce(v, item, f"{key}.{k}") for k, v in value.items()}
    scalar = _scalar(value, tp, key)
    if scalar is not _NOT_THIS:
        return scalar
    raise ConfigError(f"{key} must be {_type_name(tp)} (got {value!r})", key)


_NOT_THIS: Any = object()  # _scalar: the value is not of that type


def _scalar(value: Any, tp: Any, key: str) -> Any:
    """`value` as a bool, int, float or str `tp` (from YAML's own types or from text, as
    `--set` gives it), or _NOT_THIS; a float that is no finite number is a ConfigError."""
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif tp is float:
        number = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except (ValueError, OverflowError):
                pass
        if number is not None:
            if not math.isfinite(number):
                raise ConfigError(f"{key} must be a finite number (got {value!r})", key)
            return number
    elif tp is str and isinstance(value, str):
        return value
    return _NOT_THIS


_BOUND_OPS = {"ge": (operator.ge, ">="), "le": (operator.le, "<="), "gt": (operator.gt, ">"), "lt": (operator.lt, "<")}


def _check_bounds(value: Any, meta: Any, key: str) -> None:
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    for name, (op, sym) in _BOUND_OPS.items():
        bound = meta.get(name)
        if bound is not None and not op(value, bound):
            raise ConfigError(f"{key}={value} is out of range: must be {sym} {bound}", key)


def _unknown_key(key: str, choices: list[str], prefix: str) -> ConfigError:
    close = difflib.get_close_matches(key, choices, n=1)
    hint = f" (did you mean '{prefix}{close[0]}'?)" if close else f" (known: {', '.join(choices)})"
    return ConfigError(f"unknown key '{prefix}{key}'{hint}", prefix + key)


def check_fields(section: Any, key: str) -> None:
    """Every field of a section dataclass has its type and lies within its bounds (a
    ConfigError naming `key.field` otherwise): what build_section ensures for YAML, for a
    section constructed in Python (its __post_init__). Nested sections check themselves."""
    hints = type_hints(type(section))
    for f in dataclasses.fields(section):
        value, tp = getattr(section, f.name), hints[f.name]
        if dataclasses.is_dataclass(value):
            continue
        name = f"{key}.{f.name}" if key else f.name
        coerced = _coerce(value, tp, name)
        if coerced != value or (isinstance(value, bool) != isinstance(coerced, bool)):
            raise ConfigError(f"{name} must be {_type_name(split_optional(tp)[1])} (got {value!r})", name)
        _check_bounds(value, f.metadata, name)


_CHECKS_DEFERRED: contextvars.ContextVar[bool] = contextvars.ContextVar("tfm_config_checks_deferred", default=False)


@contextlib.contextmanager
def checks_deferred() -> Iterator[None]:
    """Within the block a Config is built without its checks across keys: the builder runs
    config_checks.validate itself once the values are final (config_loading: after --set)."""
    token = _CHECKS_DEFERRED.set(True)
    try:
        yield
    finally:
        _CHECKS_DEFERRED.reset(token)


def schema_field(default: Any, help: str, resumable: bool = False, added: bool = False, **bounds: float) -> Any:
    """A field of the schema: its default, help text, optional numeric bounds (ge/le/gt/lt), for
    train keys whether it may change between sessions of one run without starting it over,
    and whether it was `added` to a section after runs were first saved: such a key, at its
    default (which keeps the behaviour from before it), is left out of run identities, so a
    run of an earlier version still resumes (training/run_dir.py)."""
    metadata = {
        "ge": bounds.get("ge"),
        "le": bounds.get("le"),
        "gt": bounds.get("gt"),
        "lt": bounds.get("lt"),
        "help": help,
        "resumable": resumable,
        "added": added,
    }
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def schema_section(cls: Callable[[], Any], help: str, resumable: bool = False) -> Any:
    """A nested section (a dataclass; or a function making its default) as a field; a
    `resumable` one (of train) is left out of run identities, as its keys are."""
    return dataclasses.field(default_factory=cls, metadata={"help": help, "resumable": resumable})


class Section:
    """A section of the config schema (config.py): constructed in Python or from YAML, its
    fields are checked (types, bounds) when it is made; the checks across keys are
    config_checks.validate."""

    SECTION: ClassVar[str] = ""  # its dotted key, for errors

    def __post_init__(self) -> None:
        check_fields(self, self.SECTION)


def lookup(cfg: Any, key: str) -> Any:
    """The value of a dotted key (train.lr) in a config or section."""
    value = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


def as_before(section: Any) -> dict[str, Any]:
    """A config section as plain data without the keys added to it later that keep their
    default (schema_field's `added`): what the section was before they existed, for the
    digests that must not change when tfm adds a key (run identities, data fingerprints)."""
    out = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if not (f.metadata.get("added") and value == field_default(f)):
            nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
            out[f.name] = dataclasses.asdict(value) if nested else value
    return out


def checks_are_deferred() -> bool:
    return _CHECKS_DEFERRED.get()


def build_section(cls: type, raw: Any, key: str) -> Any:
    """Instantiate dataclass `cls` from mapping `raw` with type and range checks."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{key or 'the config'} must be a mapping (got {raw!r})", key)
    chooser = getattr(cls, "section_class", None)  # a section whose class depends on its content
    if chooser is not None:
        cls = chooser(raw)
    hints = type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    prefix = f"{key}." if key else ""
    kwargs = {}
    for k, v in raw.items():
        if k not in known:
            raise _unknown_key(str(k), list(known), prefix)
        value = _coerce(v, hints[k], prefix + k)
        _check_bounds(value, known[k].metadata, prefix + k)
        kwargs[k] = value
    return cls(**kwargs)


# --------------------------------------------------------------------------- overrides


def apply_override(cfg: Any, assignment: str) -> str:
    """Apply one `section.key=value` override in place, with the same checks as the file
    (errors name the --set); returns the dotted key it set."""
    if "=" not in assignment:
        raise UsageError(f"--set {assignment!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
    path, _, text = assignment.partition("=")
    parts = path.strip().split(".")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    obj: Any = cfg
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        prefix = f"{prefix}." if prefix else ""
        if isinstance(obj, dict) and i == len(parts) - 1:  # a key of an entry's options mapping
            obj[part] = value  # checked with the config, by the entry's settings
            break
        if not dataclasses.is_dataclass(obj):
            raise UsageError(f"--set {path}: '{prefix.rstrip('.')}' has no sub-keys")
        known = {f.name: f for f in dataclasses.fields(obj)}
        if part not in known:
            raise UsageError(f"--set {path}: " + str(_unknown_key(part, list(known), prefix)))
        tp = type_hints(type(obj))[part]
        if i == len(parts) - 1:
            try:
                new = _coerce(value, tp, path)
                _check_bounds(new, known[part].metadata, path)
            except UsageError as e:
                raise UsageError(f"--set {e}") from None
            setattr(obj, part, new)
        elif get_origin(tp) is dict and get_args(tp)[1] is Any:  # options: one key of them
            obj = getattr(obj, part)
        elif dataclasses.is_dataclass(getattr(obj, part)):
            obj = getattr(obj, part)
        else:
            raise UsageError(f"--set {path}: '{prefix}{part}' has no sub-keys")
    return ".".join(parts)
