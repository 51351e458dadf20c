"""Named entries of one kind: the open seams of tfm (seams.py lists them and tfm's own entries).

A `Registry` maps a name, as configs spell it, to an entry. An entry may be given as the
dotted path of an object (`"pkg.module:object"`), imported the first time it is used, so
that the names a config may give are known without importing what implements them (torch).
Entries come from:

- `register(name, entry)`: tfm's own (seams.py), or a user's module (the config's `plugins:`
  imports it: `import_plugins`); a name already registered is refused unless `replace=True`;
- installed packages: entry points in the group `tfm.<kind>`, looked at the first time a name
  is not found: `name = "pkg.module:object"` registers that object lazily, `name = "pkg.module"`
  imports a module that registers its own entries;
- a config value written as a dotted path (`train.criterion: my_pkg.losses:focal`), imported
  when it is looked up.

An entry may have settings: a dataclass (config_values.Section) of its own keys, given with
`register(..., settings=)` (a class or a dotted path: known without importing the entry; False:
it has none, known likewise) or as the entry's `settings` attribute. A config gives them in the
mapping named by the registry's `options_key` (e.g. train.criterion_options; the model section
itself for architectures).
What an entry must be is the registry's `shape` (a subclass of a base class, an instance of
one, a function of tfm's arguments: `SubclassOf`, `InstanceOf`, `Calls`), told of an object
without importing anything to look (no torch): an entry imported from a dotted path that is
something else is refused where the config is loaded, not where tfm first uses it. An entry
that tfm makes something of the config with (a transform) is called with the config then too,
and what it makes checked against the registry's `makes`.
An unknown name, a plugin that cannot be imported, or an entry of another shape is one
ConfigError line naming the key.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from .config_values import ConfigError, build_section

T = TypeVar("T")
_NO_SETTINGS = object()  # registered without settings: the entry's `settings` attribute, if any
_REGISTRIES: list[AnyRegistry] = []  # every registry, restored when a plugin fails half-way


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def resolve(path: str, key: str = "") -> Any:
    """The object a dotted path `package.module:name.attribute` names (the module imported);
    a ConfigError naming `key` when it cannot be."""
    module_name, _, attribute = path.partition(":")
    where = f"{key}: " if key else ""
    try:
        with _all_or_nothing():
            obj: Any = importlib.import_module(module_name)
    except Exception as e:  # a plugin's own error, whatever it is, is reported in one line
        raise ConfigError(f"{where}cannot import {module_name!r} (for {path!r}): {_first_line(e)}", key) from None
    for part in filter(None, attribute.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{where}{path!r}: {module_name} has no {attribute!r}", key) from None
    return obj


class Shape(Protocol):
    """What every entry of a registry is."""

    def fault(self, entry: Any) -> str:
        """Why `entry` is not of this shape, as a clause about it ("it is a function, not an
        instance of ..."); "" when it is."""
        ...


@dataclass(frozen=True)
class Calls:
    """A function (or any callable) that tfm calls with `arity` positional arguments, and whose
    `attributes` it reads."""

    arity: int
    attributes: tuple[str, ...] = ()

    def fault(self, entry: Any) -> str:
        if not callable(entry):
            return f"it is {_kind_of(entry)}, which tfm cannot call"
        missing = [name for name in self.attributes if not hasattr(entry, name)]
        if missing:
            return f"it has no {', '.join(missing)}"
        try:
            signature = inspect.signature(entry)
        except (TypeError, ValueError):  # a builtin without a signature: taken as it is
            return ""
        try:
            signature.bind(*range(self.arity))
        except TypeError:
            arguments = f"{self.arity} positional argument{'s' if self.arity > 1 else ''}"
            return f"tfm calls one with {arguments}, and it takes {signature}"
        return ""


@dataclass(frozen=True)
class SubclassOf:
    """A subclass of the class at the dotted path `base` (`module:Class`)."""

    base: str
    relation: ClassVar[str] = "a subclass"

    def fault(self, entry: Any) -> str:
        base = _imported_class(self.base)
        if base is not None and self._fits(entry, base):
            return ""
        return f"it is {_kind_of(entry)}, not {self.relation} of {self.base}"

    def _fits(self, entry: Any, base: type) -> bool:
        return inspect.isclass(entry) and issubclass(entry, base)


class InstanceOf(SubclassOf):
    """An instance of the class at the dotted path `base` (or of a subclass of it)."""

    relation = "an instance"

    def _fits(self, entry: Any, base: type) -> bool:
        return isinstance(entry, base)


def _imported_class(path: str) -> type | None:
    """The class at the dotted path `path` when its module is imported, else None: no object
    derives from a class whose module was never imported, so nothing is imported to tell (a
    config's names are checked without torch)."""
    module_name, _, name = path.partition(":")
    module = sys.modules.get(module_name)
    found: type | None = None if module is None else getattr(module, name)
    return found


class Registry(Generic[T]):
    """Entries of one `kind` (e.g. "architectures") by name; `what` names one in errors, `key`
    is the config key that chooses one (errors start with it), `options_key` the config key of
    the chosen entry's own settings, `keywords` the values of `key` that are no entry (a
    choice made elsewhere: decode.strategy's `auto`), `shape` what every entry is (None: any
    object), and `makes` what an entry called with the config makes (None too: nothing to do;
    `makes` None: entries are not called with the config)."""

    def __init__(
        self,
        kind: str,
        what: str,
        key: str = "",
        options_key: str = "",
        keywords: tuple[str, ...] = (),
        shape: Shape | None = None,
        makes: Shape | None = None,
    ):
        self.kind, self.what, self.key, self.options_key = kind, what, key, options_key
        self.keywords, self.shape, self.makes = keywords, shape, makes
        self._entries: dict[str, Any] = {}  # name -> entry, or the dotted path of one
        self._settings: dict[str, Any] = {}  # name -> a dataclass or its dotted path, or _NO_SETTINGS
        _REGISTRIES.append(self)

    def register(
        self, name: str, entry: T | str, settings: type | str | bool | None = None, replace: bool = False
    ) -> T | str:
        """Add the entry `name` (an object, or the dotted path `module:object` of one, imported
        when first used) with its `settings` dataclass (or its dotted path; False: it has none;
        None: its `settings` attribute, if any); returns `entry`. A name already registered to
        another entry is refused unless `replace`."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.what} needs a name (got {name!r})")
        known = self._entries.get(name)
        if known is not None and known is not entry and known != entry and not replace:
            raise ConfigError(
                f"{self._where()}{self.what} {name!r} is already registered ({_label(known)}): "
                "register it with replace=True to replace it",
                self.key,
            )
        self._entries[name] = entry
        self._settings[name] = _NO_SETTINGS if settings is None else settings
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry `name` (a test's, or a plugin's being replaced)."""
        self._entries.pop(name, None)
        self._settings.pop(name, None)

    def __getitem__(self, name: str) -> T:
        found = self.find(name)
        if found is None:
            raise self.unknown(name)
        return found

    def find(self, name: str, key: str = "") -> T | None:
        """The entry `name` (imported if it was given by its path), or None: installed packages'
        entry points are looked at first, and a dotted path is imported (a ConfigError naming
        `key`, else the registry's, if it cannot be or is not of the registry's shape)."""
        if name not in self._entries:
            load_plugins(self.kind, self)
        if name not in self._entries and ":" in name:
            self.register(name, name)  # a dotted path given as the name: its own entry
        entry = self._entries.get(name)
        if isinstance(entry, str):
            entry = self._import(name, entry, key)
        return entry

    def _import(self, name: str, path: str, key: str) -> T:
        """The entry `name`, registered by its dotted `path`, imported and checked against the
        registry's shape: found where the config is loaded, not as a TypeError or an
        AttributeError in the middle of a run. A dotted path given as a name that is no entry
        after all is forgotten."""
        try:
            entry: T = resolve(path, key or self.key)
            fault = "" if self.shape is None else self.shape.fault(entry)
            if fault:
                raise self._refusal(path, fault, key)
        except ConfigError:
            if path == name:
                self.unregister(name)
            raise
        self._entries[name] = entry
        return entry

    def check(self, name: str, key: str = "", also: tuple[str, ...] = ()) -> None:
        """Refuse (ConfigError naming `key`, else the registry's key) a name that is neither an
        entry nor a keyword (nor one of `also`: other values `key` takes), without importing a
        lazily registered entry."""
        if name in self.keywords or name in also or name in self._entries:
            return
        load_plugins(self.kind, self)
        if name not in self._entries and self.find(name, key) is None:
            raise self.unknown(name, key, also)

    def check_made(self, name: str, config: Any, key: str = "") -> None:
        """Refuse (ConfigError naming `key`) an entry that, called with `config`, fails or makes
        something not of the registry's `makes` (None is fine: nothing to do). Only an entry
        imported already (a dotted path, a plugin's) is called: tfm's own are not imported to
        check, which would import their layers (torch)."""
        entry = self._entries.get(name)
        if self.makes is None or entry is None or isinstance(entry, str):
            return
        try:
            made = entry(config)
        except Exception as e:  # the entry's own error, whatever it is, in one line
            raise self._refusal(name, f"called with the config, it raised {_first_line(e)}", key) from None
        fault = "" if made is None else self.makes.fault(made)
        if fault:
            raise self._refusal(name, f"what it returned for the config is no {self.what}: {fault}", key)

    def _refusal(self, name: str, fault: str, key: str) -> ConfigError:
        return ConfigError(f"{self._where(key)}{name!r} is not {_a(self.what)}: {fault}", key or self.key)

    def unknown(self, name: str, key: str = "", also: tuple[str, ...] = ()) -> ConfigError:
        failures = load_plugins(self.kind, self)
        known = ", ".join([*self.names(), *self.keywords, *also])
        broken = "".join(f"; {failure}" for failure in failures)
        return ConfigError(f"{self._where(key)}unknown {self.what} {name!r} (known: {known}){broken}", key or self.key)

    def settings_of(self, name: str) -> type | None:
        """The dataclass of the entry's own settings (None: it has none)."""
        self.check(name)
        settings = self._settings.get(name, _NO_SETTINGS)
        if settings is _NO_SETTINGS:
            own: type | None = getattr(self[name], "settings", None)
            return own
        if settings is False:
            return None
        found: type | None = resolve(settings, self.key) if isinstance(settings, str) else settings
        return found

    def options(self, name: str, given: Mapping[str, Any] | None, key: str = "") -> Any:
        """The entry's settings read from the mapping `given` (the config's options_key: its
        types, bounds and unknown keys checked as any section's, errors naming `key`); None for
        an entry without settings, which takes no options."""
        key = key or self.options_key
        settings = None if name in self.keywords else self.settings_of(name)
        if settings is None:
            if given:
                raise ConfigError(
                    f"{key}: the {self.what} {name!r} takes no options (got {', '.join(map(str, given))})", key
                )
            return None
        return build_section(settings, dict(given or {}), key)

    def __contains__(self, name: object) -> bool:
        """Whether `name` is an entry, installed packages' entry points included (as `find`)."""
        if isinstance(name, str) and name not in self._entries:
            load_plugins(self.kind, self)
        return name in self._entries

    def provider(self, name: str) -> str:
        """The dotted path of what implements the entry `name` (e.g. "transformer_cli.training.optim:ADAM")."""
        return _label(self._entries[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        return sorted(self._entries)

    def _where(self, key: str = "") -> str:
        key = key or self.key
        return f"{key}: " if key else ""


# A registry of any kind, for code that handles every registry alike (its names, settings and
# checks, not what its entries are): the one place a registry's entries are Any.
AnyRegistry = Registry[Any]


def _a(noun: str) -> str:
    """`noun` with its indefinite article."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _kind_of(entry: Any) -> str:
    """What `entry` is, in words: "a function", "the class json.decoder:JSONDecoder", "an int"."""
    if inspect.isclass(entry):
        return f"the class {_label(entry)}"
    if inspect.isroutine(entry):
        return "a function"
    if inspect.ismodule(entry):
        return f"the module {entry.__name__}"
    return _a(type(entry).__name__)


def _label(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    return f"{getattr(entry, '__module__', '?')}:{getattr(entry, '__qualname__', type(entry).__qualname__)}"


_LOADED: set[tuple[str, str, str]] = set()  # (kind, entry point name, value) imported


def load_plugins(kind: str, registry: AnyRegistry | None = None) -> list[str]:
    """Take up the entry points installed packages declare in the group `tfm.<kind>`: one
    naming an object (`module:object`) is registered in `registry` by its path, imported when
    used; one naming a module is imported (it registers its entries). Returns a line per entry
    point that failed, each time (a failure is not remembered, so it is reported every time)."""
    failures = []
    for point in metadata.entry_points(group=f"tfm.{kind}"):
        done = (kind, point.name, point.value)
        if done in _LOADED:
            continue
        package = f", package {point.dist.name}" if point.dist is not None else ""
        try:
            if point.attr and registry is not None:
                registry.register(point.name, point.value)  # a name tfm or a plugin has: refused
            else:
                with _all_or_nothing():
                    importlib.import_module(point.module)
        except Exception as e:  # a plugin's own error, whatever it is, in one line
            failures.append(
                f"the plugin {point.name} = {point.value} (tfm.{kind}{package}) failed to load: {_first_line(e)}"
            )
            continue
        _LOADED.add(done)
    return failures


def import_plugins(specs: Iterable[str], key: str = "plugins", beside: Path | None = None) -> list[str]:
    """Import the user's modules a config names in `plugins:` (each registers its entries): a
    module name (`my_pkg.plugins`), or a .py file (relative to `beside`: the config's folder;
    else the working directory), imported under its stem. Returns the specs as resolved (files
    absolute). A module that cannot be imported is one ConfigError line naming `key`."""
    resolved = []
    for spec in specs:
        if spec.endswith(".py") or "/" in spec or "\\" in spec:
            path = Path(spec).expanduser()
            path = (beside / path if beside is not None and not path.is_absolute() else path).resolve()
            _import_file(path, key)
            resolved.append(str(path))
        else:
            try:
                with _all_or_nothing():
                    importlib.import_module(spec)
            except Exception as e:  # the plugin's own error, whatever it is, in one line
                raise ConfigError(f"{key}: cannot import {spec!r}: {_first_line(e)}", key) from None
            resolved.append(spec)
    return resolved


@contextlib.contextmanager
def _all_or_nothing() -> Iterator[None]:
    """A plugin that fails while it is imported leaves no entry of its own behind (it is
    imported again, whole, the next time)."""
    saved = [(r, dict(r._entries), dict(r._settings)) for r in _REGISTRIES]
    try:
        yield
    except BaseException:
        for registry, entries, settings in saved:
            registry._entries, registry._settings = entries, settings
        raise


def _import_file(path: Path, key: str) -> None:
    """Import the module file `path` once, as a module named by its stem."""
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() == path:
            return
        raise ConfigError(
            f"{key}: {path} would be imported as {name!r}, which is already the module "
            f"{getattr(loaded, '__file__', None) or name}: rename the file",
            key,
        )
    if not path.is_file():
        raise ConfigError(f"{key}: no such plugin file: {path}", key)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up by name
    try:
        with _all_or_nothing():
            spec.loader.exec_module(module)
    except Exception as e:  # the plugin's own error, whatever it is, in one line
        del sys.modules[name]
        raise ConfigError(f"{key}: {path} failed to import: {_first_line(e)}", key) from None
