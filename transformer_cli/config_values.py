"""Turning YAML values into typed config fields: coercion, bounds, unknown keys, `--set`.

Generic over the schema's dataclasses (config.py): every problem is one ConfigError naming
the key, e.g. ``train.lr must be a finite number (got 'inf')``, and holding it in `keys` so
that the loader can say which file and line (or which --set) gave the value.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
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


@dataclasses.dataclass(frozen=True)
class Moved:
    """A key that moved into an entry's own settings, or was renamed (a section's `MOVED`, by
    its old name): `to` is its new key below the section (e.g. "optimizer_options.betas",
    "real_weight"); `default` the value the old key had when it was not given, which run
    identities keep (`as_before`), so that runs of earlier versions still resume. The old key
    is read for a deprecation period."""

    to: str
    default: Any


_MOVED_NOTES: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "tfm_moved_notes", default=None
)


@contextlib.contextmanager
def moved_keys_noted() -> Iterator[list[tuple[str, str]]]:
    """Within the block, every old key read (from a mapping or a --set) is noted as (its dotted
    key, the dotted key it moved to): the loader warns of them. Elsewhere (a checkpoint's saved
    settings) old keys are read silently."""
    notes: list[tuple[str, str]] = []
    outer = _MOVED_NOTES.get()
    token = _MOVED_NOTES.set(notes)
    try:
        yield notes
    finally:
        _MOVED_NOTES.reset(token)
        if outer is not None:  # a block within a block: the outer one notes them too
            outer.extend(notes)


def moved_into_place(cls: type, raw: Any, prefix: str = "") -> Any:
    """A config's mapping (or a section's, of dataclass `cls`) with the old keys of each of its
    sections at their new keys (a copy where any moved): for one file of an `extends:` chain
    before it is merged, so that a file's old key overrides its parent's new one."""
    if not isinstance(raw, dict):
        return raw
    raw = _moved_in(getattr(cls, "MOVED", {}), raw, prefix)
    hints = type_hints(cls)
    for k, v in list(raw.items()):
        tp = hints.get(k)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            moved = moved_into_place(tp, v, f"{prefix}{k}.")
            if moved is not v:
                raw = {**raw, k: moved}
    return raw


def _note_moved(old: str, new: str) -> None:
    notes = _MOVED_NOTES.get()
    if notes is not None:
        notes.append((old, new))


def _moved_in(moved: dict[str, Moved], raw: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`raw` with the values of old keys put at their new keys (a copy, when there are any); an
    old key at its old default is dropped, as it meant what the entry's default means (so a
    full dump of an earlier version's settings, a checkpoint's, reads for any entry). An old
    key given beside its new one is a ConfigError naming both."""
    if not any(k in moved for k in raw):
        return raw
    raw = copy.deepcopy(raw)
    for old in [k for k in raw if k in moved]:
        if raw[old] == moved[old].default:
            del raw[old]
            _note_moved(prefix + old, prefix + moved[old].to)
            continue
        *path, last = moved[old].to.split(".")
        mapping = raw
        for part in path:
            if mapping.get(part) is None:
                mapping[part] = {}
            if not isinstance(mapping[part], dict):
                break  # not a mapping: the schema's check names it
            mapping = mapping[part]
        else:
            if last in mapping:
                new = prefix + moved[old].to
                raise ConfigError(f"{prefix}{old} is the old name of {new}: give {new} alone", prefix + old, new)
            mapping[last] = raw.pop(old)
            _note_moved(prefix + old, prefix + moved[old].to)
    return raw


class Section:
    """A section of the config schema (config.py): constructed in Python or from YAML, its
    fields are checked (types, bounds) when it is made; the checks across keys are
    config_checks.validate."""

    SECTION: ClassVar[str] = ""  # its dotted key, for errors
    MOVED: ClassVar[dict[str, Moved]] = {}  # old key -> where it moved (read for a deprecation period)

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
    moved: dict[str, Moved] = getattr(type(section), "MOVED", {})
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if isinstance(value, dict):  # an options mapping: without the keys that moved into it
            value = _without(value, [m.to.split(".")[1:] for m in moved.values() if m.to.split(".")[0] == f.name])
        if not (f.metadata.get("added") and value == field_default(f)):
            nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
            out[f.name] = dataclasses.asdict(value) if nested else value
    for old, m in moved.items():  # as the key it moved from held it
        out[old] = _dig(section, m.to.split("."), m.default)
    return out


def _without(mapping: dict[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    """A copy of a nested mapping without the keys at `paths`, mappings left empty dropped."""
    out = copy.deepcopy(mapping)
    for path in paths:
        parents, inner = [], out
        for part in path[:-1]:
            if not isinstance(inner.get(part), dict):
                break
            parents.append((inner, part))
            inner = inner[part]
        else:
            inner.pop(path[-1], None)
            for parent, part in reversed(parents):
                if not parent[part]:
                    del parent[part]
    return out


def _dig(section: Any, path: list[str], default: Any) -> Any:
    """The value at a dotted path of fields then mapping keys, or `default` where it is not."""
    value = getattr(section, path[0])
    for part in path[1:]:
        if not isinstance(value, dict) or part not in value:
            return default
        value = value[part]
    return value


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
    raw = _moved_in(getattr(cls, "MOVED", {}), raw, prefix)
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
        if isinstance(obj, dict):  # a key of an entry's options mapping (or of one entry's)
            if i == len(parts) - 1:
                obj[part] = value  # checked with the config, by the entry's settings
                break
            obj = obj.setdefault(part, {})
            if not isinstance(obj, dict):
                raise UsageError(f"--set {path}: '{prefix}{part}' has no sub-keys")
            continue
        if not dataclasses.is_dataclass(obj):
            raise UsageError(f"--set {path}: '{prefix.rstrip('.')}' has no sub-keys")
        known = {f.name: f for f in dataclasses.fields(obj)}
        moved = getattr(type(obj), "MOVED", {}).get(part)
        if part not in known and moved is not None:  # its old name: set the new key
            new_path = ".".join([*parts[:i], *moved.to.split("."), *parts[i + 1 :]])
            _note_moved(prefix + part, prefix + moved.to)
            return apply_override(cfg, f"{new_path}={text}")
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
