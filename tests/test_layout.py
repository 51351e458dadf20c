"""The package's shape, as docs/architecture.md describes it: small modules, sub-packages that
import only downward (data and model know nothing of training, serving or the CLI), no import
cycles, every sub-package installed, and every module a test file of its own name."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import transformer_cli

PACKAGE = Path(transformer_cli.__file__).parent
MAX_LINES = 450
# The layers, bottom up (docs/architecture.md): a module imports, when it runs, from its own
# layer and the ones below it (imports under `if TYPE_CHECKING:` are for type checkers only).
# A sub-package is one name; the top-level modules stand in layers too: the host, config and
# file helpers below everything, the model files' and the API's with their layers, the CLI on top.
BASE = {
    "checkpoint",
    "config",
    "config_checks",
    "config_corrections",
    "config_distill",
    "config_docs",
    "config_loading",
    "config_model",
    "config_retrain",
    "config_sections",
    "config_synthetic",
    "config_train",
    "config_values",
    "contracts",
    "corpus_files",
    "errors",
    "export_manifest",
    "extras",
    "fsutil",
    "host",
    "loss",
    "plots",
    "provenance",
    "records",
    "registry",
    "seams",
    "version",
}
LAYERS = [
    BASE,
    {"tokenizers"},
    {"data"},
    {"corrections"},
    {"model"},
    {"inference"},
    {"export"},
    {"hf"},
    {"model_io", "model_source"},
    {"evaluate", "api"},
    {"synthetic"},
    {"training"},
    {"serving"},
    {"cli", "cli_app", "cli_feedback", "cli_models", "cli_training", "__init__", "__main__"},
]
ABOVE = {name: set().union(*LAYERS[i + 1 :]) for i, layer in enumerate(LAYERS) for name in layer}


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_longer_than_450_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these along their parts: {long}"


def test_every_sub_package_is_installed():
    """pyproject.toml lists the packages a wheel holds: each sub-package, or an install lacks it."""
    listed = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    packages = [p.parent.name for p in PACKAGE.glob("*/__init__.py")]
    missing = [name for name in packages if f'"transformer_cli.{name}"' not in listed]
    assert not missing, f"add them to [tool.setuptools] packages: {missing}"


def test_every_module_imports_only_downward():
    upward = {}
    for path in _modules():
        rel = path.relative_to(PACKAGE).parts
        layer = rel[0] if len(rel) > 1 else path.stem  # a sub-package, or a top-level module
        assert layer in ABOVE, f"{layer}: put it in a layer of LAYERS"
        bad = _run_time_packages(path) & ABOVE[layer]
        if bad:
            upward["/".join(rel)] = sorted(bad)
    assert not upward, f"imports from a layer above: {upward}"


def _run_time_packages(path: Path) -> set[str]:
    """The top-level parts of transformer_cli (a sub-package or a module) that `path` imports
    when it runs, relative or absolute, function-local imports included."""
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0: a top-level module
    found = set()
    for node in _run_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb to the package root
                if node.level <= depth:
                    continue  # within the sub-package
                parts = (node.module or "").split(".")
                found.update([parts[0]] if parts[0] else [a.name for a in node.names])
            elif (module := node.module or "").startswith("transformer_cli."):
                found.add(module.split(".")[1])
        else:
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("transformer_cli."))
    return found


def _module_name(path: Path) -> str:
    parts = ("transformer_cli", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _run_time_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level or inside a function, not those under
    `if TYPE_CHECKING:` (which only type checkers follow: seams.py names every layer's types so)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _run_time_imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _run_time_imports(node)


def _imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports when it runs, function-local imports included:
    `from X import y` imports the module X.y if there is one, else X."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, *filter(None, [node.module])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        found.update(t for t in targets if t in modules and t != name)
    return found


def test_no_module_imports_one_that_imports_it_back():
    """No import cycle through the package's modules, however long, function-local imports
    included: every module can be read (and imported) after the ones it uses."""
    paths = {_module_name(p): p for p in _modules()}
    graph = {name: _imported_modules(path, set(paths)) for name, path in paths.items()}
    done: set[str] = set()

    def cycle_from(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            found = cycle_from(imported, [*trail, name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = cycle_from(name, [])
        assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


TESTS = Path(__file__).parent
# The allow-list: modules (paths relative to the package) that have no test file of their own
# name, each with the reason and where it is tested instead (an end-to-end test of a file named
# otherwise, say). Empty: every module has one. Keep it short; a module added here needs a reason
# a reviewer accepts, and an entry whose module is gone fails the test below.
NOT_MIRRORED: dict[str, str] = {}


def _mirror_names(module: Path, shared: set[str]) -> set[str]:
    """The names a test file of `module` may have: test_<module>.py, or, for a module of a
    sub-package, test_<sub-package>_<module>.py, the only one where another module has its name
    (pytest imports test files by their bare names, so two test_manifest.py cannot both be)."""
    rel = module.relative_to(PACKAGE)
    qualified = {f"test_{rel.parts[0]}_{module.stem}.py"} if len(rel.parts) > 1 else set()
    return qualified if module.stem in shared and qualified else {f"test_{module.stem}.py", *qualified}


def _imports(text: str, module: str) -> bool:
    """Whether `text` imports the dotted `module` (at the top, in a function, or in the code a
    test runs in another process): `import a.b.c`, `from a.b.c import x`, `from a.b import c`."""
    package, _, name = module.rpartition(".")
    return bool(
        re.search(rf"\b{re.escape(module)}\b", text)
        or re.search(rf"from {re.escape(package)} import [^\n]*\b{name}\b", text)
    )


def test_every_module_has_a_test_file_of_its_name_that_imports_it():
    """transformer_cli/<...>/<module>.py is tested in tests/**/test_<module>.py (see
    _mirror_names), a file that imports it, unless NOT_MIRRORED says where it is tested."""
    modules = [p for p in _modules() if p.name not in ("__init__.py", "__main__.py")]
    stems = [p.stem for p in modules]
    shared = {stem for stem in stems if stems.count(stem) > 1}
    test_files: dict[str, list[Path]] = {}
    for path in TESTS.rglob("test_*.py"):
        test_files.setdefault(path.name, []).append(path)
    missing, unimported = [], []
    for module in modules:
        rel = str(module.relative_to(PACKAGE))
        if rel in NOT_MIRRORED:
            continue
        found = [path for name in sorted(_mirror_names(module, shared)) for path in test_files.get(name, [])]
        if not found:
            missing.append(rel)
        elif not any(_imports(path.read_text(encoding="utf-8"), _module_name(module)) for path in found):
            unimported.append(rel)
    assert not missing, f"give these a test file of their name (tests/**/test_<module>.py): {missing}"
    assert not unimported, f"their test files do not import them: {unimported}"
    stale = [rel for rel in NOT_MIRRORED if not (PACKAGE / rel).is_file()]
    assert not stale, f"NOT_MIRRORED names modules that are gone: {stale}"
