"""Loading a config: YAML files (a key given twice refused), `extends:` chains, `--set`
overrides, and where each value came from, so that every problem is one `UsageError` line
naming the key and its origin, e.g. ``configs/x.yaml:12: model.n_heads=7 must divide
model.d_model=256``.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from .config import Config
from .config_checks import validate
from .config_distill import expand_distill
from .config_values import (
    ConfigError,
    apply_override,
    build_section,
    checks_deferred,
    lookup,
    moved_into_place,
    moved_keys_noted,
)
from .errors import UsageError
from .registry import import_plugins
from .seams import choices

log = logging.getLogger("tfm")


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first_line[key]})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def packaged_configs() -> dict[str, Path]:
    """Config files shipped inside the installed package, by file name."""
    root = resources.files("transformer_cli.configs")
    return {p.name: Path(str(p)) for p in root.iterdir() if p.name.endswith((".yaml", ".yml"))}


def resolve_config_path(spec: str, beside: Path | None = None) -> Path:
    """Find a config: in the folder `beside` (that of a config naming it in `extends:`), then
    the path as given, then ./configs/, then the copies shipped with tfm."""
    names = [spec] if spec.endswith((".yaml", ".yml")) else [spec, spec + ".yaml"]
    folders = list(dict.fromkeys([*([beside] if beside is not None else []), Path("."), Path("configs")]))
    for name in names:
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
        shipped = packaged_configs().get(Path(name).name)
        if shipped is not None and Path(name).name == name:
            return shipped
    shipped_names = ", ".join(sorted(packaged_configs()))
    raise UsageError(
        f"config file not found: {spec!r} (looked in {', '.join(map(str, folders))} "
        f"and the configs shipped with tfm: {shipped_names})"
    )


Origins = dict[str, str]  # dotted key -> "file:line" of the YAML that set it


def _read_mapping(path: Path) -> tuple[dict[str, Any], Origins]:
    """A config file's YAML mapping and where each of its keys is, or a UsageError naming the
    file (and line)."""
    try:
        loader = _StrictLoader(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            raw = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{where}: YAML syntax error: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read config: {e}") from None
    if raw is None or raw == {}:
        raise UsageError(
            f"{path}: the config is empty: give at least one section (copy one of "
            "the shipped configs, e.g. base.yaml, to start from its values)"
        )
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: the config must be a YAML mapping of sections")
    assert node is not None  # raw was constructed from it
    return raw, _key_lines(node, path)


def _key_lines(node: yaml.Node, path: Path, prefix: str = "") -> Origins:
    """`file:line` of every key in a YAML mapping node, nested keys dotted (model.n_heads)."""
    lines: Origins = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}"
            lines[key] = f"{path}:{key_node.start_mark.line + 1}"
            lines.update(_key_lines(value_node, path, f"{key}."))
    return lines


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """`child` over `parent`, section by section (a child's section updates the parent's); a
    child's null for a mapping drops the parent's (an entry's options, when the child chooses
    another entry: `schedule: constant` with `schedule_options: null`)."""
    merged = dict(parent)
    for key, value in child.items():
        if value is None and isinstance(merged.get(key), dict) and key != "sha256":
            del merged[key]
        elif isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "sha256":
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class OldKey(NamedTuple):
    """An old key read (a section's `MOVED`): its dotted key, the key it moved to, and where it
    was given (`file:line`, or the --set)."""

    old: str
    new: str
    where: str


def _resolved_mapping(
    path: Path, chain: tuple[Path, ...] = ()
) -> tuple[dict[str, Any], Origins, list[OldKey], set[str]]:
    """The file's mapping with its `extends:` parents merged in (the parent is found beside the
    file first, then like any config name), where each key was set: the file and line that
    gave its value, a child's over its parent's; the old keys each file gave, parents' first;
    and the parents' option keys of the entries a child chose anew (`_crossed`)."""
    raw, origins = _read_mapping(path)
    try:
        with moved_keys_noted() as moved:  # (this file's old keys, before a child's override them)
            raw = moved_into_place(Config, raw)
    except ConfigError as e:  # an old key beside its new one
        raise UsageError(f"{_blame(e.keys, origins) or path}: {e}") from None
    old_keys = [OldKey(old, new, origins[old]) for old, new in moved]
    origins.update((key.new, key.where) for key in old_keys)
    _plugins_beside(raw, path.parent)
    parent = raw.pop("extends", None)
    if parent is None:
        return raw, origins, old_keys, set()
    where = origins["extends"]
    if not isinstance(parent, str):
        raise UsageError(f"{where}: extends must be a config file name (got {parent!r})")
    try:
        parent_path = resolve_config_path(parent, beside=path.parent)
    except UsageError as e:
        raise UsageError(f"{where}: extends: {e}") from None
    if parent_path.resolve() in {p.resolve() for p in (*chain, path)}:
        raise UsageError(f"{where}: extends {parent} makes a cycle")
    inherited, inherited_origins, inherited_old_keys, crossed = _resolved_mapping(parent_path, (*chain, path))
    inherited.pop("name", None)  # a name is never inherited
    inherited_origins.pop("name", None)
    crossed = (crossed | _crossed(inherited, raw, inherited_origins)) - set(origins)  # (a child's own: its own)
    return _merge(inherited, raw), {**inherited_origins, **origins}, inherited_old_keys + old_keys, crossed


def load_config(spec: str, overrides: list[str] | None = None) -> Config:
    """Load, override and validate a config; `spec` is a path or a bare name like base.yaml.
    A config may start from another with `extends: base.yaml` and state only what differs.
    An error names where the value at fault came from: `file:line` (of the file in the extends
    chain that set it), or the `--set` (both when a check involves both)."""
    path = resolve_config_path(spec)
    raw, origins, old_keys, crossed = _resolved_mapping(path)
    raw.setdefault("name", Path(path).stem)
    try:
        _import_plugins_of(raw)  # first: they may add the keys read below
        others = expand_distill(raw, origins, overrides or [])  # distill: as the keys it is now
        with moved_keys_noted() as read:  # (old keys of a plugin's sections: its own MOVED)
            with checks_deferred():  # validated once the overrides are in
                cfg: Config = build_section(Config, raw, "")
        old_keys += [OldKey(old, new, origins.get(old, str(path))) for old, new in read]
        for assignment in others:
            chosen = {c.key: lookup(cfg, c.key) for c in choices()}
            old_keys += _override(cfg, assignment, origins)
            for c in choices():
                if lookup(cfg, c.key) != chosen[c.key]:  # a --set chose anew
                    crossed |= {k for k, w in origins.items() if _under(k, c.option_keys) and not w.startswith("--set")}
        import_plugins(cfg.plugins)  # (those a --set adds)
        _settle_moved(cfg, old_keys, origins)
        _leave_out_inherited(cfg, origins, {k for k in crossed if not origins.get(k, "").startswith("--set")})
        validate(cfg)
    except ConfigError as e:
        raise UsageError(f"{_blame(e.keys, origins) or path}: {e}") from None
    setattr(cfg, _GIVEN_AS, (spec, list(overrides or [])))  # not a config key: copies keep it
    return cfg


_GIVEN_AS = "_tfm_given_as"  # the (spec, --set overrides) a Config was loaded from


def given_overrides(cfg: Config) -> list[str]:
    """The --set overrides `cfg` was loaded with, as typed (none for a config built otherwise)."""
    return list(getattr(cfg, _GIVEN_AS, ("", []))[1])


def command_for(cfg: Config, command: str, *options: str) -> str:
    """`tfm COMMAND -c CONFIG --set ... OPTIONS` for the config as the command line gave it:
    its path as typed and its --set overrides, for an error to suggest a command that works
    as printed (a config not made by `load_config`: `-c CONFIG`)."""
    spec, overrides = getattr(cfg, _GIVEN_AS, ("CONFIG", []))
    sets = [word for assignment in overrides for word in ("--set", assignment)]
    return shlex.join(["tfm", command, "-c", spec, *sets, *options])


def _override(cfg: Config, assignment: str, origins: Origins) -> list[OldKey]:
    """Apply one --set (its own errors name it) and note it as the origin of its key; returns
    the old key it gave, if it gave one."""
    where = f"--set {assignment.strip()}"
    with moved_keys_noted() as moved:
        origins[apply_override(cfg, assignment)] = where
    return [OldKey(old, new, where) for old, new in moved]


def _blame(keys: tuple[str, ...], origins: Origins) -> str:
    """Where the keys' values came from, e.g. "c.yaml:3, --set model.d_model=100" (an item of a
    list, train.betas[0], is blamed on its list); "" when every one is a default."""
    found = (origins.get(key.split("[")[0]) for key in keys)
    return ", ".join(dict.fromkeys(place for place in found if place))


def _import_plugins_of(raw: dict[str, Any]) -> None:
    """Import the plugins a config's mapping names (a value of another type is left for the
    schema's check to refuse)."""
    plugins = raw.get("plugins")
    if isinstance(plugins, list) and all(isinstance(p, str) for p in plugins):
        import_plugins(plugins)


def _plugins_beside(raw: dict[str, Any], folder: Path) -> None:
    """A config's plugin files made absolute, relative to the file that names them (module
    names, and values that are no list of strings, are left for the schema's checks)."""
    plugins = raw.get("plugins")
    if isinstance(plugins, list) and all(isinstance(p, str) for p in plugins):
        raw["plugins"] = [str((folder / p).resolve()) if p.endswith(".py") or "/" in p else p for p in plugins]


def _settle_moved(cfg: Config, old_keys: list[OldKey], origins: Origins) -> None:
    """Warn of each old key read, in one line naming where it was given (and what gave its new
    key over it, a child's file or a --set): it now sits at its new key, or, where the chosen
    entry has no such setting (train.warmup_steps beside schedule constant: ignored before as
    well), it is dropped."""
    for key in old_keys:
        given = origins.setdefault(key.new, key.where)
        unused = _not_taken(cfg, key.new)
        if unused:
            _drop(cfg, key.new)
            log.warning("warning: %s: %s is ignored: %s (drop it)", key.where, key.old, unused)
            continue
        over = f"overridden by {given}; " if given != key.where else ""
        log.warning(
            "warning: %s: %s is now %s (%sthe old name is read until a later release)",
            key.where,
            key.old,
            key.new,
            over,
        )


def _not_taken(cfg: Config, key: str) -> str:
    """Why the entry whose options hold `key` has no such setting ("" when it has, or when the
    entry is not known: the config's checks say so)."""
    for choice in choices():
        options = next((o for o in choice.option_keys if key.startswith(o + ".")), None)
        if options is None:
            continue
        registry, rest = choice.registry, key[len(options) + 1 :].split(".")
        chosen = lookup(cfg, choice.key)
        if isinstance(chosen, list):  # options by entry name (train.transform_options.source_noise)
            if rest[0] not in chosen:
                return f"{choice.key} has no {rest[0]}"
            chosen, rest = rest[0], rest[1:]
        else:
            chosen = choice.entry(chosen)  # noised_beam: beam's settings
        if chosen not in registry and chosen not in registry.keywords:
            return ""  # an unknown name: the config's checks say so
        settings = None if chosen in registry.keywords else registry.settings_of(chosen)
        if settings is None or rest[0] not in {f.name for f in dataclasses.fields(settings)}:
            return f"the {registry.what} {chosen!r} has no setting {rest[0]!r}"
    return ""


def _leave_out_inherited(cfg: Config, origins: Origins, crossed: set[str]) -> None:
    """Leave out, with a warning each, the options of an entry that a child config (or a --set)
    replaced by another (`crossed`: base.yaml's label_smoothing under a child's `criterion:
    focal`) which the chosen entry has no setting for; those it has (adam's betas under adamw)
    are kept, and options given beside the choice are the new entry's, checked as such."""
    for key in sorted(crossed):
        unused = _not_taken(cfg, key)
        if unused:
            _drop(cfg, key)
            log.warning("warning: %s: %s is left out: %s", origins.get(key, key), key, unused)


def _crossed(parent: dict[str, Any], child: dict[str, Any], parent_origins: Origins) -> set[str]:
    """The parent's option keys (dotted) of each entry `child` chooses anew (another value of
    the key that chooses it)."""
    out: set[str] = set()
    for choice in choices():
        given, before = _at(child, choice.key), _at(parent, choice.key)
        if given is not _ABSENT and before is not _ABSENT and given != before:
            out.update(k for k in parent_origins if _under(k, choice.option_keys))
    return out


def _under(key: str, option_keys: tuple[str, ...]) -> bool:
    return any(key.startswith(options + ".") for options in option_keys)


_ABSENT = object()


def _at(mapping: dict[str, Any], key: str) -> Any:
    node: Any = mapping
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _drop(cfg: Config, key: str) -> None:
    """Remove a key from the options mapping that holds it, and mappings it leaves empty."""
    path = key.split(".")
    mapping: Any = cfg
    while dataclasses.is_dataclass(mapping):  # the sections down to the options mapping
        mapping = getattr(mapping, path.pop(0))
    parents = []
    for part in path[:-1]:
        if not isinstance(mapping.get(part), dict):
            return  # not there (an old key at its default is not moved)
        parents.append((mapping, part))
        mapping = mapping[part]
    mapping.pop(path[-1], None)
    for parent, part in reversed(parents):
        if not parent[part]:
            del parent[part]
