"""A command whose optional extra is not installed says in one line which extra to install (exit 2),
never an internal error: the real `tfm` entry point, run on an install without the extra's
module (helpers.run_tfm_without makes it unimportable in that process)."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import ROOT, run_tfm_without, untrained_checkpoint

from transformer_cli.extras import EXTRAS


def hint(extra: str, module: str) -> str:
    return f"needs the {extra} extra: pip install 'tfm[{extra}]' (No module named '{module}')"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("extras") / "tiny.pt")


@pytest.mark.parametrize("module", ["fastapi", "uvicorn", "prometheus_client"])
def test_a_newcomers_tfm_serve_names_the_serve_extra(module, tmp_path):
    r = run_tfm_without([module], "serve", "-c", "base.yaml", folder=tmp_path / "site", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"tfm: error: tfm serve {hint('serve', module)}\n"


def test_train_tensorboard_names_its_extra_before_training(tmp_path):
    r = run_tfm_without(
        ["tensorboard"],
        "train",
        "-c",
        "tiny.yaml",
        "--set",
        "train.tensorboard=true",
        folder=tmp_path / "site",
        cwd=tmp_path,
    )
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"tfm: error: train.tensorboard {hint('tensorboard', 'tensorboard')}\n"
    assert list(tmp_path.iterdir()) == [tmp_path / "site"]  # nothing prepared or trained


@pytest.mark.parametrize(
    "fmt, module, extra, needed_by",
    [
        ("ctranslate2", "ctranslate2", "ctranslate2", "tfm export"),
        ("hf", "safetensors", "hf", "tfm export --format hf"),
    ],
)
def test_tfm_export_names_its_extra(fmt, module, extra, needed_by, tiny, tmp_path):
    out = tmp_path / "out"
    r = run_tfm_without(
        [module], "export", "--checkpoint", str(tiny), "--format", fmt, "-o", str(out), folder=tmp_path / "site"
    )
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"tfm: error: {needed_by} {hint(extra, module)}\n"
    assert not out.exists()


def test_models_that_need_an_extra_name_it(tiny, tmp_path):
    from helpers import ct2_export

    from transformer_cli.checkpoint import Checkpoint
    from transformer_cli.hf.export import export_hf

    ct2, hf = tmp_path / "ct2", tmp_path / "hf"
    ct2_export(tiny, ct2)
    export_hf(Checkpoint.read(tiny), tiny, hf)
    expected = {
        ("ctranslate2", str(ct2)): f"the CTranslate2 export {ct2} {hint('ctranslate2', 'ctranslate2')}",
        ("safetensors", str(hf)): f"reading {hf / 'model.safetensors'} {hint('hf', 'safetensors')}",
        ("huggingface_hub", "Helsinki-NLP/opus-mt-de-en"): (
            "Helsinki-NLP/opus-mt-de-en is no file or folder here; fetching it from the Hugging Face "
            f"Hub {hint('hf', 'huggingface_hub')}"
        ),
    }

    def translate(module: str, model: str) -> subprocess.CompletedProcess:
        return run_tfm_without(
            [module], "translate", "--checkpoint", model, "Ein Hund.", folder=tmp_path / module, cwd=tmp_path
        )

    with ThreadPoolExecutor(len(expected)) as pool:  # side by side: each imports torch
        runs = list(pool.map(lambda key: translate(*key), expected))
    for r, ((module, _), message) in zip(runs, expected.items()):
        assert (r.returncode, r.stdout, r.stderr) == (2, "", f"tfm: error: {message}\n"), module


def test_each_module_is_in_the_extra_it_names():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRAS.items():
        distribution = module.partition(".")[0].replace("_", "-")
        assert any(d.replace("_", "-").startswith(distribution) for d in extras[extra]), (module, extra)
