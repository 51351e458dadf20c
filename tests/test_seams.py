"""seams.py: every registry a config chooses from, and tfm's own entries in each, named by
dotted path: each path imports to its object (and its settings class), the config key each
registry reads is a key of the schema, and importing seams (reading a config's names) imports
no torch and no layer that implements them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from transformer_cli import seams
from transformer_cli.config import Config
from transformer_cli.config_values import lookup
from transformer_cli.registry import Registry

REGISTRIES = {name: value for name, value in vars(seams).items() if isinstance(value, Registry) and name.isupper()}


def test_every_registry_is_named_here_and_the_config_ones_are_checked_at_load_time():
    assert set(REGISTRIES) == {
        "ARCHITECTURES",
        "TOKENIZERS",
        "CORPORA",
        "TRANSFORMS",
        "CRITERIA",
        "OPTIMIZERS",
        "SCHEDULES",
        "SEARCH_STRATEGIES",
        "EXPORTERS",
        "ENGINES",
        "TEXT_CORPORA",
    }
    # TEXT_CORPORA: synthetic.*.text also takes files and folders (config_checks checks its names)
    assert set(seams.CHOSEN_BY_CONFIG) == set(REGISTRIES.values()) - {
        seams.ENGINES,
        seams.TEXT_CORPORA,
    }
    cfg = Config()
    for registry in seams.CHOSEN_BY_CONFIG:
        lookup(cfg, registry.key)  # a key of the schema
        if registry.options_key:
            assert isinstance(lookup(cfg, registry.options_key), dict)


def test_the_other_keys_that_choose_an_entry_are_keys_of_the_schema():
    """seams.choices: each registry's own key, then back-translation's search (whose noised_beam
    stands for beam: config_synthetic.NOISED_BEAM)."""
    from transformer_cli.config_synthetic import NOISED_BEAM

    cfg = Config()
    others = seams.choices()[len(seams.CHOSEN_BY_CONFIG) :]
    assert others == [seams.BACK_TRANSLATION_SEARCH]
    for choice in others:
        assert choice.entry(lookup(cfg, choice.key)) in choice.registry  # the default, an entry
        assert isinstance(lookup(cfg, choice.options_key), dict)
    assert seams.BACK_TRANSLATION_SEARCH.entry(NOISED_BEAM) == "beam"


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_every_entry_of_tfms_own_imports_to_its_object(name):
    registry = REGISTRIES[name]
    for entry in registry.names():
        found = registry.find(entry)
        assert found is not None, f"{name}[{entry!r}]"
        registry.settings_of(entry)  # its settings class, where it names one, imports too


def test_the_defaults_of_the_schema_are_entries():
    cfg = Config()
    for registry in seams.CHOSEN_BY_CONFIG:
        value = lookup(cfg, registry.key)
        for entry in value if isinstance(value, list) else [value]:
            assert entry in registry or entry in registry.keywords, (registry.key, entry)


def fresh_python(code: str) -> str:
    """What `code` prints in a new interpreter (nothing of tfm imported yet), stripped."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_importing_the_seams_imports_no_layer():
    code = (
        "import sys; import transformer_cli.seams as s; "
        "s.ARCHITECTURES.check('transformer'); s.TOKENIZERS.check('sentencepiece'); "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('transformer_cli.model', "
        "'transformer_cli.data', 'transformer_cli.training', 'transformer_cli.inference'))))"
    )
    assert fresh_python(code) == "[]"


def test_a_config_naming_tfms_own_entries_and_their_settings_loads_without_torch():
    """The entries' settings are known by path (or known to be none: settings=False), so the
    checks of decode.n_best against the strategy and of old keys against the chosen entry
    import no layer."""
    code = (
        "import sys; from transformer_cli.config_loading import load_config; "
        "load_config('tiny.yaml', ['decode.strategy=beam', 'decode.beam_size=4', 'decode.n_best=2', "
        "'train.schedule=constant', 'train.warmup_steps=5', 'train.optimizer_options.eps=1e-8']); "
        "load_config('tiny.yaml', ['decode.strategy=greedy']); "
        "load_config('tiny.yaml', ['decode.strategy=sample', 'decode.strategy_options.topk=5']); "
        "load_config('tiny.yaml', ['train.schedule_options.warmup_steps=5', 'train.criterion_options.rdrop_alpha=1', "
        "'train.transforms=[source_noise]', 'train.transform_options.source_noise.lowercase=0.1']); "
        "print('torch' in sys.modules)"
    )
    assert fresh_python(code) == "False"
