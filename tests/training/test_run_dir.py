"""A run's identity decides whether the next `tfm train` resumes it or starts over: it must not
change when tfm adds a config key whose default keeps the old behaviour."""

from transformer_cli.config import Config
from transformer_cli.config_loading import load_config
from transformer_cli.training.run_dir import run_identity


def test_the_identity_of_a_run_is_the_one_earlier_versions_computed():
    # Pinned from tfm ea3b6f1, before model.architecture, scale_embeddings, output_bias, sinusoid_layout
    # and train.init_from/continued existed: a finished run of then is still finished now.
    assert run_identity(Config(), "data") == "b39136344ab34f525894560a471e991818ab4fd7a1859a769b9ab633b18cbbcd"
    base = "c5f4112dbec3a3639564fd258b4fe0d7d4480fa0f64ff49457574b64fd97aa56"
    assert run_identity(load_config("base.yaml"), "data") == base


def test_a_new_key_set_away_from_its_default_changes_the_identity():
    cfg = Config()
    before = run_identity(cfg, "data")
    cfg.model.output_bias = True
    assert run_identity(cfg, "data") != before
