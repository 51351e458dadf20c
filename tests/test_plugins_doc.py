"""docs/plugins.md's worked plugin, as a user copies it: its Python block as my_plugins.py and its
config block as focal.yaml, checked by a real `tfm config` (the plugin loaded, its keys shown, a
misspelt key refused in one line), and its focal loss equal to cross-entropy at gamma 0 and
below it otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from helpers import run_tfm
from test_plugins import registries_restored

from transformer_cli.data.batching import Batch

DOC = Path(__file__).parent.parent / "docs" / "plugins.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _written(tmp_path: Path) -> Path:
    (python,), (config,) = _blocks("python"), _blocks("yaml")
    (tmp_path / "my_plugins.py").write_text(python, encoding="utf-8")
    path = tmp_path / "focal.yaml"
    path.write_text(config, encoding="utf-8")
    return path


def test_the_worked_plugin_loads_and_its_keys_are_checked(tmp_path) -> None:
    config = _written(tmp_path)
    r = run_tfm("config", "-c", str(config))
    assert r.returncode == 0, r.stderr
    assert "train.criterion = focal" in r.stdout and "train.criterion_options.gamma = 1.5" in r.stdout
    assert "train.schedule = linear_decay" in r.stdout and "train.schedule_options.total_steps = 6000" in r.stdout
    assert "train.criterion_options.label_smoothing is left out: the training criterion 'focal' has no" in r.stderr
    r = run_tfm("config", "-c", str(config), "--set", "train.criterion_options.gama=1")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "tfm: error: --set train.criterion_options.gama=1: unknown key 'train.criterion_options.gama' "
        "(did you mean 'train.criterion_options.gamma'?)"
    ), r.stderr


def test_the_focal_loss_is_cross_entropy_at_gamma_0_and_less_above(tmp_path) -> None:
    import importlib.util

    _written(tmp_path)
    with registries_restored():
        spec = importlib.util.spec_from_file_location("doc_plugins", tmp_path / "my_plugins.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        logits = torch.randn(2, 3, 7)
        batch = Batch(
            torch.zeros(2, 4, dtype=torch.long),
            torch.zeros(2, 3, dtype=torch.long),
            torch.tensor([[3, 4, 0], [5, 0, 0]]),
            3,
        )
        net = lambda src, tgt_in: logits  # noqa: E731
        plain, nll = module.Focal(0, 0.0)(net, batch, torch.float32)
        expected = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0, reduction="sum"
        )
        assert torch.allclose(plain, expected) and torch.allclose(nll, expected)
        focal, _ = module.Focal(0, 2.0)(net, batch, torch.float32)
        assert 0 < focal < plain
        train = type(
            "Train", (), {"schedule": "linear_decay", "schedule_options": {"warmup_steps": 4, "total_steps": 12}}
        )
        assert [module.linear_decay(train, step) for step in (2, 4, 8, 12, 20)] == [0.5, 1.0, 0.5, 0.0, 0.0]
