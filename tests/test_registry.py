"""registry.py: how entries come in (register, a dotted path as the value, a user's module,
an installed distribution's entry points), and how they are refused (a name taken, a plugin
that fails: one line, every time)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import write_config, write_corpus

from transformer_cli import registry
from transformer_cli.config_loading import load_config
from transformer_cli.config_values import ConfigError
from transformer_cli.errors import UsageError
from transformer_cli.registry import Registry
from transformer_cli.seams import SCHEDULES


@pytest.fixture
def isolated():
    saved = [(r, dict(r._entries), dict(r._settings)) for r in registry._REGISTRIES]
    yield
    for r, entries, settings in saved:
        r._entries, r._settings = entries, settings


def _half(cfg, step):
    return 0.5


def _third(cfg, step):
    return 1 / 3


def test_a_taken_name_is_replaced_only_when_asked():
    things: Registry = Registry("things_of_a_test", "thing", "x.thing")
    things.register("a", _half)
    things.register("a", _half)  # the same entry again (a module imported twice): nothing changes
    with pytest.raises(ConfigError) as taken:
        things.register("a", _third)
    assert str(taken.value) == (
        f"x.thing: thing 'a' is already registered ({__name__}:_half): register it with replace=True to replace it"
    )
    things.register("a", _third, replace=True)
    assert things["a"] is _third
    with pytest.raises(ConfigError, match=r"already registered \(transformer_cli.training.optim:constant\)"):
        SCHEDULES.register("constant", _half)  # tfm's own: by its path, not imported to refuse


def test_a_dotted_path_is_an_entry_without_registering(tmp_path, monkeypatch, isolated):
    (tmp_path / "my_schedules.py").write_text("def halving(cfg, step):\n    return 0.5 ** step\n\nNOT_CALLABLE = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    corpus = write_corpus(tmp_path / "corpus")
    cfg = load_config(
        str(write_config(tmp_path / "c.yaml", tmp_path, corpus, train={"schedule": "my_schedules:halving"}))
    )
    assert SCHEDULES[cfg.train.schedule](cfg.train, 3) == 0.125
    for value, error in [
        ("my_schedules:nope", "'my_schedules:nope': my_schedules has no 'nope'"),
        (  # found, and callable, but not with a schedule's arguments
            "json:dumps",
            "'json:dumps' is not a learning-rate schedule: tfm calls one with 2 positional arguments, and it "
            "takes (obj, *, skipkeys=False,",
        ),
        ("my_schedules:NOT_CALLABLE", "'my_schedules:NOT_CALLABLE' is not a learning-rate schedule: it is an int"),
        (
            "no_such_module:f",
            "cannot import 'no_such_module' (for 'no_such_module:f'): "
            "ModuleNotFoundError: No module named 'no_such_module'",
        ),
    ]:
        path = write_config(tmp_path / "c.yaml", tmp_path, corpus, train={"schedule": value})
        with pytest.raises(UsageError) as refused:
            load_config(str(path))
        assert f": train.schedule: {error}" in str(refused.value)
        assert value not in SCHEDULES.names()  # not left behind as a known name


def test_a_plugin_that_fails_half_way_is_reported_every_time_and_leaves_nothing(tmp_path, isolated):
    (tmp_path / "half.py").write_text(
        textwrap.dedent("""\
        from transformer_cli.seams import SCHEDULES

        SCHEDULES.register("flat", lambda cfg, step: 1.0)
        raise RuntimeError("no GPU here")
        """)
    )
    path = write_config(tmp_path / "c.yaml", tmp_path, write_corpus(tmp_path / "corpus"), plugins=["half.py"])
    for _ in range(2):  # the second load imports it again and says so again
        with pytest.raises(UsageError) as refused:
            load_config(str(path))
        assert str(refused.value) == (
            f"{path}:{_line(path, 'plugins')}: plugins: {tmp_path / 'half.py'} "
            "failed to import: RuntimeError: no GPU here"
        )
        assert "flat" not in SCHEDULES and "half" not in sys.modules


DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: toy-extension\nVersion: 1.0\n",
    "entry_points.txt": textwrap.dedent("""\
        [tfm.criteria]
        ep_loss = toy_extension.losses:make_loss

        [tfm.schedules]
        ep_halving = toy_extension.schedules

        [tfm.optimizers]
        broken = toy_extension.broken
        """),
}
PACKAGE = {
    "__init__.py": "",
    "losses.py": "def make_loss(tc, pad_id):\n    return 'the loss of an installed package'\n",
    "schedules.py": "from transformer_cli.seams import SCHEDULES\n\n"
    "SCHEDULES.register('ep_halving', lambda cfg, step: 0.5 ** step)\n",
    "broken.py": "raise RuntimeError('broken on purpose')\n",
}
SCRIPT = textwrap.dedent("""\
    import json, sys
    from transformer_cli.config_loading import load_config
    from transformer_cli.errors import UsageError
    from transformer_cli.seams import CRITERIA, SCHEDULES

    known_before = "ep_loss" in CRITERIA  # `in` looks at the entry points as a lookup does
    cfg = load_config(sys.argv[1])
    out = {"known_before": known_before,"imported_at_load": "toy_extension.losses" in sys.modules,
           "known_by_in": "ep_halving" in SCHEDULES,
           "loss": CRITERIA[cfg.train.criterion](cfg.train, 0),
           "schedule": SCHEDULES[cfg.train.schedule](cfg.train, 2), "errors": []}
    for _ in range(2):
        try:
            load_config(sys.argv[2])
        except UsageError as e:
            out["errors"].append(str(e))
    print(json.dumps(out))
    """)


def test_entry_points_of_an_installed_distribution_register_and_a_broken_one_is_named(tmp_path):
    """A distribution installed as pip would leave it (a *.dist-info folder beside the package on
    sys.path), in a fresh process: its `module:object` entry point is known by name without
    being imported, its module entry point registers what it holds, and its broken one is one
    line in every error that looks for a name."""
    site = tmp_path / "site"
    for folder, files in ((site / "toy_extension-1.0.dist-info", DIST_INFO), (site / "toy_extension", PACKAGE)):
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    corpus = write_corpus(tmp_path / "corpus")
    good = write_config(
        tmp_path / "good.yaml", tmp_path, corpus, train={"criterion": "ep_loss", "schedule": "ep_halving"}
    )
    bad = write_config(tmp_path / "bad.yaml", tmp_path, corpus, train={"optimizer": "nadam"})
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(good), str(bad)], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["imported_at_load"] is False  # known by its entry point, imported when used
    assert out["known_before"] is True and out["known_by_in"] is True
    assert (out["loss"], out["schedule"]) == ("the loss of an installed package", 0.25)
    line = _line(bad, "optimizer")
    expected = (
        f"{bad}:{line}: train.optimizer: unknown optimizer 'nadam' (known: adam, adamw); the plugin "
        "broken = toy_extension.broken (tfm.optimizers, package toy-extension) failed to load: "
        "RuntimeError: broken on purpose"
    )
    assert out["errors"] == [expected, expected]
    r = subprocess.run(
        [str(Path(sys.executable).parent / "tfm"), "config", "-c", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"tfm: error: {expected}\n")


def _line(path: Path, key: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(f"{key}:"))


def test_an_entry_tfm_cannot_call_is_refused_where_the_config_is_loaded(tmp_path):
    """`--set train.optimizer=json:dumps` once passed the check and died as an internal
    TypeError after preprocessing: now it is one line, exit 2, before anything is made."""
    from helpers import run_tfm

    r = run_tfm("config", "-c", "tiny.yaml", "--set", "train.optimizer=json:dumps")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "train.optimizer: 'json:dumps' is not a optimizer" not in r.stderr
    assert "train.optimizer: 'json:dumps' is not an optimizer: tfm calls one with 3 positional arguments" in r.stderr


STRATEGY = "transformer_cli.contracts.strategy:SearchStrategy"
OF_ANOTHER_KIND = [  # (section, key, value, what is wrong)
    (
        "tokenizer",
        "kind",
        "json:dumps",
        "not a tokenizer kind: it is a function, not a subclass of transformer_cli.contracts.tokenizer:Tokenizer",
    ),
    (
        "tokenizer",
        "kind",
        "json:JSONDecoder",
        "not a tokenizer kind: it is the class json.decoder:JSONDecoder, not a subclass of "
        "transformer_cli.contracts.tokenizer:Tokenizer",
    ),
    (
        "data",
        "corpus",
        "json:dumps",
        "not a parallel corpus: it is a function, not an instance of transformer_cli.contracts.corpus:ParallelCorpus",
    ),
    (
        "data",
        "corpus",
        "transformer_cli.data.sources:PublicCorpus",  # the class, where an instance is the entry
        "not a parallel corpus: it is the class transformer_cli.data.sources:PublicCorpus, not an instance of "
        "transformer_cli.contracts.corpus:ParallelCorpus",
    ),
    (
        "train",
        "transforms",
        ["json:dumps"],
        "not a transform: called with the config, it raised TypeError: Object of type Config is not JSON serializable",
    ),
    (
        "train",
        "transforms",
        ["builtins:repr"],
        "not a transform: what it returned for the config is no transform: it is a str, which tfm cannot call",
    ),
    ("decode", "strategy", "json:dumps", f"not a search strategy: it is a function, not an instance of {STRATEGY}"),
    (
        "export",
        "format",
        "json:dumps",
        "not an export format: it is a function, not an instance of transformer_cli.contracts.exporter:Exporter",
    ),
    (
        "synthetic",
        "back_translation.search",
        "json:dumps",
        f"not a search strategy: it is a function, not an instance of {STRATEGY}",
    ),
]


@pytest.mark.parametrize(("section", "key", "value", "wrong"), OF_ANOTHER_KIND)
def test_a_dotted_path_to_an_object_of_another_kind_is_refused_where_the_config_is_loaded(
    tmp_path, isolated, section, key, value, wrong
):
    """Every registry knows what its entries are (a subclass of its base, an instance of it, a
    function of its arguments that makes one): a dotted path to something else is one line
    naming the file, the line and the key, not an internal error after the data work."""
    nested = {}
    *parents, last = key.split(".")
    inner = nested
    for part in parents:
        inner = inner.setdefault(part, {})
    inner[last] = value
    path = write_config(tmp_path / "c.yaml", tmp_path, write_corpus(tmp_path / "corpus"), **{section: nested})
    with pytest.raises(UsageError) as refused:
        load_config(str(path))
    name = value[0] if isinstance(value, list) else value
    assert str(refused.value).startswith(f"{path}:{_line(path, last)}: {section}.{key}: {name!r} is {wrong}")


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("tokenizer", "kind", "transformer_cli.tokenizers.word:WordTokenizer"),
        ("data", "corpus", "transformer_cli.data.sources:FILES"),
        ("train", "transforms", ["transformer_cli.data.augment:source_noise"]),
        ("decode", "strategy", "transformer_cli.inference.strategies:BEAM"),
        ("export", "format", "transformer_cli.export.bundle:CT2_EXPORTER"),
    ],
)
def test_a_dotted_path_to_an_entry_of_the_right_kind_loads(tmp_path, isolated, section, key, value):
    path = write_config(tmp_path / "c.yaml", tmp_path, write_corpus(tmp_path / "corpus"), **{section: {key: value}})
    assert getattr(getattr(load_config(str(path)), section), key) == value


NO_TORCH = textwrap.dedent("""\
    import json, sys
    from transformer_cli.config_loading import load_config
    from transformer_cli.errors import UsageError

    errors = []
    for assignment in sys.argv[1:]:
        try:
            load_config("tiny.yaml", [assignment])
        except UsageError as e:
            errors.append(str(e))
    print(json.dumps({"errors": errors, "torch": "torch" in sys.modules}))
    """)


def test_an_entry_of_another_kind_is_exit_2_in_one_line_without_importing_torch():
    """`tfm config` (and every command) refuses `--set decode.strategy=json:dumps` in one line,
    exit 2; telling what a path names imports no layer of tfm (no torch) to look."""
    from helpers import ROOT

    sets = [
        "decode.strategy=json:dumps",
        "tokenizer.kind=json:dumps",
        "data.corpus=json:dumps",
        "train.transforms=[json:dumps]",
        "export.format=json:dumps",
        "synthetic.back_translation.search=json:dumps",
    ]
    r = subprocess.run(
        [sys.executable, "-c", NO_TORCH, *sets], capture_output=True, text=True, cwd=ROOT / "configs", timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["torch"] is False
    assert [e.split(": ")[:2] for e in out["errors"]] == [[f"--set {s}", s.split("=")[0]] for s in sets]
    r = subprocess.run(
        [str(Path(sys.executable).parent / "tfm"), "config", "-c", "tiny.yaml", "--set", sets[0]],
        capture_output=True,
        text=True,
        cwd=ROOT / "configs",
        timeout=120,
    )
    assert (r.returncode, r.stdout, r.stderr) == (
        2,
        "",
        f"tfm: error: --set {sets[0]}: decode.strategy: 'json:dumps' is not a search strategy: it is a function, "
        f"not an instance of {STRATEGY}\n",
    )
