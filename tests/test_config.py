"""config.py: the schema itself: the shipped configs and the defaults are valid configs, a
config round-trips through its YAML, and where a config's data and run go. (Loading a file:
test_config_loading.py; a value's typing: test_config_values.py; the checks across keys:
test_config_checks.py.)"""

from pathlib import Path

import yaml
from helpers import config_from_dict

from transformer_cli.config import Config
from transformer_cli.config_loading import load_config, packaged_configs


def test_shipped_configs_load_and_validate():
    shipped = packaged_configs()
    assert {"base.yaml", "seed.yaml", "tiny.yaml"} <= set(shipped)
    for name in shipped:
        assert load_config(name).name == Path(name).stem


def test_seed_matches_the_notebook_recipe():
    cfg = load_config("seed.yaml")
    m, t, tr = cfg.model, cfg.tokenizer, cfg.train
    assert (t.kind, t.lowercase, t.min_freq) == ("spacy", True, 2)
    assert (m.n_encoder_layers, m.n_decoder_layers, m.d_model, m.n_heads, m.d_ff) == (3, 3, 256, 8, 512)
    assert (m.dropout, m.positional, m.max_len) == (0.1, "learned", 100)
    assert (tr.optimizer, tr.lr, tr.clip_norm, tr.batch_size, tr.epochs) == ("adam", 5e-4, 1.0, 128, 10)
    assert tr.criterion_options == {"label_smoothing": 0.0} and tr.schedule == "constant"
    assert tr.optimizer_options == {"betas": [0.9, 0.999], "eps": 1e-8}


def test_resolved_config_round_trips():
    cfg = load_config("base.yaml", ["train.lr=1e-3"])
    again = config_from_dict(yaml.safe_load(cfg.to_yaml()))
    assert again == cfg


def test_defaults_are_a_valid_config():
    cfg = Config()
    assert config_from_dict(cfg.to_dict()) == cfg


def test_the_data_and_run_folders_are_named_after_the_config():
    cfg = load_config("tiny.yaml", ["data.dir=/srv/data", "train.out_dir=runs"])
    assert cfg.data_dir == Path("/srv/data/tiny") and cfg.run_dir == Path("runs/tiny")
