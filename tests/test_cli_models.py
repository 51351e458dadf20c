"""cli_models.py: the model commands' options, through the Typer app in this process (an
untrained model: what is printed, not how good it is): translate (arguments or stdin, n-best
lines, an attention heatmap of one sentence), which model a command uses, export's options,
and evaluate's. (With a trained model: inference/test_translate_cli.py, export/test_export_cli.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import untrained_checkpoint, write_config
from typer.testing import CliRunner

from transformer_cli.cli import app
from transformer_cli.cli_models import chosen_models
from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("cli-models") / "m.pt")


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


def test_translate_prints_a_line_per_input_from_arguments_or_stdin(model):
    by_args = run("translate", "--checkpoint", str(model), "--max-output-len", "4", "Ein Mann.", "Zwei Hunde.")
    assert by_args.exit_code == 0, by_args.stderr
    assert len(by_args.stdout.splitlines()) == 2
    by_stdin = run(
        "translate", "--checkpoint", str(model), "--max-output-len", "4", "-", stdin="Ein Mann.\n\nZwei Hunde.\n"
    )
    assert by_stdin.exit_code == 0 and by_stdin.stdout.splitlines()[::2] == by_args.stdout.splitlines()
    assert by_stdin.stdout.splitlines()[1] == ""  # an empty line stays one
    n_best = run("translate", "--checkpoint", str(model), "--n-best", "2", "--max-output-len", "4", "Ein Mann.")
    lines = [line.split("\t") for line in n_best.stdout.splitlines()]
    assert [(i, len(parts)) for i, *parts in lines] == [("0", 2), ("0", 2)] and float(lines[0][1]) >= float(lines[1][1])


def test_an_attention_heatmap_is_of_one_sentence(model, tmp_path):
    png = tmp_path / "attention.png"
    r = run("translate", "--checkpoint", str(model), "--max-output-len", "4", "--attention", str(png), "Ein Mann.")
    assert r.exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    r = run("translate", "--checkpoint", str(model), "--attention", str(png), "Ein Mann.", "Zwei.")
    assert (r.exit_code, r.stderr) == (2, "tfm: error: --attention needs exactly one sentence as an argument\n")


def test_the_model_is_the_checkpoints_given_else_the_ensemble_else_the_published_one(tmp_path, corpus_dir):
    cfg = load_config(str(write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)))
    assert chosen_models(cfg, "toy.yaml", [Path("a.pt"), Path("b.pt")]) == [Path("a.pt"), Path("b.pt")]
    cfg.decode.ensemble = ["x.pt", "y.pt"]
    assert chosen_models(cfg, "toy.yaml", []) == [Path("x.pt"), Path("y.pt")]
    cfg.decode.ensemble = []
    with pytest.raises(
        UsageError, match=r"no model in .* \(published.pt or best.pt\): train one with `tfm train -c toy.yaml`"
    ):
        chosen_models(cfg, "toy.yaml", [])
    cfg.run_dir.mkdir(parents=True)
    (cfg.run_dir / "best.pt").write_bytes(b"")
    assert chosen_models(cfg, "toy.yaml", []) == [cfg.run_dir / "best.pt"]


def test_export_writes_the_format_asked_and_refuses_what_does_not_fit_it(model, tmp_path):
    out = tmp_path / "ct2"
    r = run("export", "--checkpoint", str(model), "--output", str(out), "--quantization", "int8")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith(f"exported {model} -> {out} (ctranslate2, int8 weights, ")
    r = run("export", "--checkpoint", str(out), "--output", str(tmp_path / "again"))
    assert (r.exit_code, r.stderr) == (2, f"tfm: error: {out} is already an export; export its source checkpoint\n")
    r = run("export", "--checkpoint", str(model), "--format", "hf", "--quantization", "int8", "-o", str(tmp_path / "h"))
    assert r.exit_code == 2 and "--quantization is for --format ctranslate2" in r.stderr
    r = run("export", "--checkpoint", str(model), "--format", "onnx", "-o", str(tmp_path / "o"))
    assert r.exit_code == 2 and "--format: unknown export format 'onnx'" in r.stderr


def test_evaluate_takes_its_own_files_in_pairs_and_a_split_by_name(model, tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)
    src = tmp_path / "src.de"
    src.write_text("Ein Mann.\n")
    r = run("evaluate", "-c", str(cfg), "--checkpoint", str(model), "--src", str(src))
    assert (r.exit_code, r.stderr) == (2, "tfm: error: --src and --ref go together\n")
    r = run("evaluate", "-c", str(cfg), "--checkpoint", str(model), "--split", "train")
    assert (r.exit_code, r.stderr) == (2, "tfm: error: --split must be val or test (got 'train')\n")


def test_its_commands_are_the_apps():
    from transformer_cli import cli_models

    ours = {
        command.name or command.callback.__name__
        for command in app.registered_commands
        if command.callback is not None and command.callback.__module__ == cli_models.__name__
    }
    assert ours == {"evaluate", "translate", "serve", "export"}
