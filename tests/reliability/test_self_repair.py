"""Damage that the next nightly run repairs by itself, and the published model's history.

Issue 13, defects 11 (damaged preprocessed data), 12 (damaged published.pt), 14 (work folders
left by a killed preprocess) and 15 (rollback, margin and minimum quality at the gate).
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from reliability.cron_helpers import error_lines, run_dir, write_cron_config

from transformer_cli.checkpoint import Checkpoint, read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import TfmError
from transformer_cli.training.promotion import Decision, GateRules, Metric, Outcome, Policy, Scorer, promote
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training


def _damage(path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i : i + 32] = b"\xee" * 32
    path.write_bytes(bytes(data))


@pytest.fixture
def own_data(tmp_path, cron_data):
    """A config with its own preprocessed folder (the tests here damage it)."""
    paths = {**cron_data, "data": tmp_path / "data"}
    cfg = write_cron_config(tmp_path, paths, epochs=1)
    prepare(load_config(str(cfg)))
    return cfg, tmp_path / "data" / "cron"


def test_damaged_preprocessed_files_are_rebuilt_by_the_next_run(own_data, tfm_fork, tmp_path):
    cfg, folder = own_data
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with open(folder / "val.00000.src.bin", "r+b") as f:
        f.truncate(100)  # as a full disk or a bad copy leaves it
    (folder / "tokenizer.json").write_text("{not json")
    # Reading the damaged files directly says which file and what to do.
    with pytest.raises(
        TfmError,
        match=r"preprocessed file .*val\.00000\.src\.bin is damaged or unreadable "
        r"\(50 ids, its index says \d+\).*tfm preprocess --force",
    ):
        load_prepared(load_config(str(cfg))).split("val")
    [pre] = tfm_fork.run_all(tmp_path / "logs", ("preprocess", "-c", str(cfg)))
    assert pre.returncode == 0, pre.stderr
    assert "is damaged (" in pre.stderr and "rebuilding it" in pre.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"
    }  # rebuilt identically
    _damage(folder / "train.00000.tgt.bin")  # same size, other bytes: found by its checksum
    [train] = tfm_fork.run_all(tmp_path / "logs2", ("train", "-c", str(cfg)))
    assert train.returncode == 0, train.stderr
    assert "train.00000.tgt.bin does not match its checksum" in train.stderr


def test_stale_work_folders_of_a_killed_preprocess_are_removed(own_data, tmp_path):
    cfg, folder = own_data
    dead = folder.parent / ".cron.tmp-999999999"  # no such PID
    dead.mkdir()
    (dead / "val.00000.src.bin").write_bytes(b"half")
    old = folder.parent / ".cron.old-999999998"
    old.mkdir()
    alive = folder.parent / f".cron.tmp-{1}"  # PID 1 is alive: its work is not ours to remove
    alive.mkdir()
    prepare(load_config(str(cfg)))
    assert not dead.exists() and not old.exists() and alive.exists()


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, cron_data):
    """A 1-epoch and a 3-epoch best.pt on the same data (the second is better)."""
    root = tmp_path_factory.mktemp("two_models")
    runs = {}
    for name, epochs in (("weak", 1), ("good", 3)):
        cfg = write_cron_config(root / name, cron_data, epochs=epochs)
        run_training(load_config(str(cfg)))
        runs[name] = run_dir(cfg)
    cfg = load_config(str(write_cron_config(root / "good", cron_data, epochs=3)))
    scorer = Scorer(load_prepared(cfg), "de", "en", torch.device("cpu"), "fp32")
    return {
        "weak": runs["weak"] / "best.pt",
        "good": runs["good"] / "best.pt",
        "good_config": root / "good" / "cron.yaml",
        "scorer": scorer,
    }


def test_damaged_published_is_restored_even_when_the_decision_was_taken(tmp_path, cron_data, two_models, tfm_fork):
    config = write_cron_config(tmp_path, cron_data, epochs=3)  # the good run's config, elsewhere
    run = run_dir(config)
    shutil.copytree(run_dir(two_models["good_config"]), run)
    published = run / "published.pt"
    good = published.read_bytes()
    _damage(published)
    [r] = tfm_fork.run_all(tmp_path / "logs", ("train", "-c", str(config)))
    assert r.returncode == 0, r.stderr
    assert "already finished" in r.stderr  # the run itself had nothing to do ...
    assert "promotion: promoted (published.pt was damaged)" in r.stderr  # ... the gate repaired it
    assert published.read_bytes() == good and read_payload(published)
    assert (run / "published.pt.damaged").is_file()
    assert error_lines(r.stderr) == []


def test_promotions_keep_history_and_rollback_restores_it(tmp_path, two_models, tfm_fork):
    run = RunDir(tmp_path / "checkpoints" / "cron")
    run.create()
    scorer = two_models["scorer"]
    shutil.copyfile(two_models["weak"], run.best)
    assert promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer) == Decision(
        Outcome.PROMOTED, "promoted (none published yet)"
    )
    shutil.copyfile(two_models["good"], run.best)
    assert promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer) == Decision(
        Outcome.PROMOTED, "promoted (at least as good)"
    )
    [kept] = list(run.published_history.glob("*.pt"))
    assert kept.read_bytes() == two_models["weak"].read_bytes()

    config = write_cron_config(tmp_path, {"corpus": tmp_path, "data": tmp_path / "d", "cache": tmp_path / "c"})
    [listing] = tfm_fork.run_all(tmp_path / "logs", ("publish", "-c", str(config)))
    [rolled] = tfm_fork.run_all(tmp_path / "logs1", ("publish", "-c", str(config), "--rollback"))
    assert listing.returncode == 0 and rolled.returncode == 0, listing.stderr + rolled.stderr
    assert run.published.read_bytes() == two_models["weak"].read_bytes()
    entry = json.loads(run.promotions.read_text().splitlines()[-1])
    assert entry["decision"].startswith("rolled back to ")
    # The gate does not promote the rolled-back best.pt again on the next run ...
    again = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer)
    assert again.outcome is Outcome.ALREADY_DECIDED
    assert again.text.startswith("already decided for this best.pt")
    # ... and with nothing left in the history, a second rollback says so (exit 2).
    [r] = tfm_fork.run_all(tmp_path / "logs2", ("publish", "-c", str(config), "--rollback"))
    assert r.returncode == 2 and error_lines(r.stderr)[0].startswith("tfm: error: nothing to roll back to")


def test_margin_and_minimum_quality_keep_a_marginal_model_out(tmp_path, two_models):
    scorer = two_models["scorer"]
    run = RunDir(tmp_path / "run")
    run.create()
    shutil.copyfile(two_models["good"], run.best)
    strict = GateRules(min_bleu=99.0)
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, strict)
    assert decision.outcome is Outcome.KEPT
    assert decision.text.startswith("kept out: greedy validation BLEU")
    assert "promote_min_bleu=99.0" in decision.text
    assert not run.published.exists()
    shutil.copyfile(two_models["weak"], run.published)
    weak, good = (scorer(Checkpoint.read(p), Metric.VALID_LOSS) for p in (two_models["weak"], two_models["good"]))
    margin = GateRules(margin_loss=(weak - good) + 0.01)  # better, but not by this much
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, margin)
    assert decision == Decision(Outcome.KEPT, f"kept published (not better by {margin.margin_loss} or more)")
    assert run.published.read_bytes() == two_models["weak"].read_bytes()
