"""cli_training.py: the training commands' options, through the Typer app in this process:
preprocess (its summary table, up to date the second time, --reverse, --source), config
(--set shown resolved), and publish (no run: one line; a run: what it publishes; a run that a
`tfm train` holds: exit 75). (Training itself: training/test_train.py, test_session.py.)"""

from __future__ import annotations

import shutil

import pytest
from helpers import untrained_checkpoint, write_config, write_corpus
from typer.testing import CliRunner

from transformer_cli.cli import app
from transformer_cli.config_loading import load_config
from transformer_cli.data.manifest import DataManifest
from transformer_cli.training.run_dir import RunDir


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def toy(tmp_path, corpus_dir):
    return write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)


def test_preprocess_prints_what_it_made_and_is_up_to_date_the_second_time(toy, tmp_path):
    first = run("preprocess", "-c", str(toy))
    assert first.exit_code == 0, first.stderr
    assert first.stdout.splitlines()[0].split()[:2] == ["split", "pairs"] and "train" in first.stdout
    assert (tmp_path / "data" / "toy" / "manifest.json").is_file()
    again = run("preprocess", "-c", str(toy), "--quiet")
    assert (again.exit_code, again.stdout) == (0, "")  # --quiet: no table either
    reverse = run("preprocess", "-c", str(toy), "--reverse", "-q")
    assert reverse.exit_code == 0, reverse.stderr
    reversed_data = DataManifest.read(load_config(str(toy)).data_dir.with_name("toy.reverse"))
    assert reversed_data is not None and reversed_data.langs == ("en", "de")


def test_preprocess_reads_the_corpus_from_source(tmp_path, corpus_dir):
    elsewhere = write_corpus(tmp_path / "elsewhere", {"train": 50, "val": 10, "test_2016_flickr": 10})
    cfg = write_config(tmp_path / "toy.yaml", tmp_path, corpus_dir)
    r = run("preprocess", "-c", str(cfg), "--source", str(elsewhere), "--set", "data.min_train_pairs=10")
    assert r.exit_code == 0, r.stderr
    assert [line.split()[:2] for line in r.stdout.splitlines()[1:4]] == [["train", "50"], ["val", "10"], ["test", "10"]]


def test_config_prints_the_resolved_values(toy):
    r = run("config", "-c", str(toy), "--set", "train.lr=0.0007")
    assert r.exit_code == 0 and "train.lr" in r.stdout and "0.0007" in r.stdout
    r = run("config", "-c", str(toy), "--set", "train.lr=fast")
    assert (r.exit_code, r.stderr) == (2, "tfm: error: --set train.lr must be a number (got 'fast')\n")


def test_publish_shows_what_a_run_publishes_and_waits_for_no_train(toy, tmp_path):
    r = run("publish", "-c", str(toy))
    assert r.exit_code == 2 and r.stderr.startswith("tfm: error: no run in ") and "tfm train -c" in r.stderr
    run_dir = RunDir(load_config(str(toy)).run_dir)
    run_dir.create()
    shutil.copyfile(untrained_checkpoint(tmp_path / "m.pt"), run_dir.published)
    r = run("publish", "-c", str(toy))
    assert r.exit_code == 0 and str(run_dir.published) in r.stdout, r.stderr
    run_dir.lock()
    try:
        r = run("publish", "-c", str(toy))
        assert r.exit_code == 75 and "is busy: another tfm train holds its lock" in r.stderr
    finally:
        run_dir.unlock()


def test_its_commands_are_the_apps():
    from transformer_cli import cli_training

    ours = {
        command.name or command.callback.__name__
        for command in app.registered_commands
        if command.callback is not None and command.callback.__module__ == cli_training.__name__
    }
    assert ours == {"preprocess", "train", "distill", "synthesize", "config", "publish"}


def test_distill_takes_every_option_of_synthesize():
    """`tfm distill` is `tfm synthesize` of a config with teachers: the same options (its
    processes too), each with the same help, default and bounds (--config's help says which
    config each wants), as --help lists them."""
    import typer.main

    command = typer.main.get_command(app)
    options = {name: {p.name for p in command.commands[name].params} for name in ("distill", "synthesize")}
    assert options["distill"] == options["synthesize"] and "nproc_per_node" in options["distill"]

    def declared(name: str) -> list[tuple[object, ...]]:
        params = [p for p in command.commands[name].params if p.name != "config"]
        fields = ("opts", "secondary_opts", "help", "default", "hidden", "min", "max", "multiple")
        return [tuple(getattr(p, field, None) for field in fields) for p in params]

    assert declared("distill") == declared("synthesize") and len(declared("distill")) == 4

    def listed(name: str) -> list[str]:
        lines = CliRunner().invoke(app, [name, "--help"], terminal_width=100).output.splitlines()
        options = lines[lines.index("Options:") :]
        return options[next(i for i, line in enumerate(options) if "--set" in line) :]  # after --config

    assert listed("distill") == listed("synthesize")
    assert any("--nproc-per-node" in line for line in listed("distill"))
    assert any("Only warnings and errors on stderr." in line for line in listed("synthesize"))


def test_distill_wants_a_config_that_forward_translates_its_training_sources(toy):
    r = run("distill", "-c", str(toy))
    assert r.exit_code == 2
    assert "no forward translation of the training sources: set synthetic.forward_translation.text: [parallel]" in (
        r.stderr
    )
