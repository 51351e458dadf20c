"""What a nightly `tfm train` does with a finished, changed, misconfigured or impossible run."""

from __future__ import annotations

import gzip
import json
import shutil

from reliability.cron_helpers import epoch_ends, run_all, run_dir, write_cron_config

from transformer_cli.checkpoint import read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.training.session import run_training


def test_exit_codes_no_op_bad_config_and_runtime_failure(tmp_path, make_config):
    cfg = make_config("done", epochs=1)
    run = run_dir(cfg)
    run_training(load_config(str(cfg)))
    before = {p.name: p.stat().st_mtime_ns for p in run.glob("*.pt")}
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file where the output folder should go\n")
    noop, bad, failing = run_all(
        ("train", "-c", str(cfg)),
        ("train", "-c", str(cfg), "--set", "model.n_heads=7", "--quiet"),
        ("train", "-c", str(cfg), "--set", f"train.out_dir={blocker}/runs", "--quiet"),
    )
    # 0: a finished run whose inputs did not change is a no-op; nothing is rewritten.
    assert noop.returncode == 0, noop.stderr
    assert "already finished" in noop.stderr and "nothing to do" in noop.stderr
    assert {p.name: p.stat().st_mtime_ns for p in run.glob("*.pt")} == before
    # 2: a bad config is refused before anything is touched, in one line naming where the
    # values came from.
    assert bad.returncode == 2, bad.stderr
    d_model_line = cfg.read_text().splitlines().index("  d_model: 32") + 1
    assert bad.stderr.strip().splitlines() == [
        f"tfm: error: --set model.n_heads=7, {cfg}:{d_model_line}: model.n_heads=7 must divide model.d_model=32"
    ]
    # 1: a failure at run time (here the run folder cannot be created), in one line.
    assert failing.returncode == 1, failing.stderr
    [line] = failing.stderr.strip().splitlines()
    assert line.startswith("tfm: error: cannot create run directory") and str(blocker) in line
    assert "Traceback" not in bad.stderr + failing.stderr


def test_raised_epochs_continue_a_finished_run(make_config):
    cfg = make_config("more", epochs=1)
    run = run_dir(cfg)
    run_training(load_config(str(cfg)))
    config = load_config(str(cfg))
    config.train.epochs = 2
    outcome = run_training(config)
    assert outcome.trained and outcome.progress.epoch == 2
    assert "resuming at epoch 2, step 10" in (run / "train.log").read_text()
    assert [s for s, _, _ in epoch_ends(run)] == [10, 20]


def test_changed_settings_or_data_start_a_new_run(tmp_path, make_config, cron_data):
    cfg_path = make_config("changed", epochs=1)
    run = run_dir(cfg_path)
    run_training(load_config(str(cfg_path)))
    first = read_payload(run / "last.pt")["run_identity"]
    published = (run / "published.pt").read_bytes()

    changed = load_config(str(cfg_path))
    changed.train.lr = 1e-3  # an optimization setting: a different run
    run_training(changed)
    log = (run / "train.log").read_text()
    assert "was trained with other data or settings: starting a new run" in log
    assert "the published model stays until a better one is promoted" in log
    second = read_payload(run / "last.pt")["run_identity"]
    assert second != first and epoch_ends(run)[0][0] == 10 and len(epoch_ends(run)) == 1
    # The new run's first epoch is worse than the published model: the gate keeps the latter.
    assert _last_decision(run)["decision"] == "kept published (it is better)"
    assert (run / "published.pt").read_bytes() == published

    corpus = tmp_path / "corpus-v2"  # tomorrow's data: one more training pair
    shutil.copytree(cron_data["corpus"], corpus)
    for lang, line in (("de", "Ein hund sieht einen ball."), ("en", "A dog sees a ball.")):
        path = corpus / f"train.{lang}.gz"
        text = gzip.decompress(path.read_bytes()) + f"{line}\n".encode()
        path.write_bytes(gzip.compress(text, mtime=0))
    new_data = write_cron_config(
        tmp_path / "changed", {**cron_data, "corpus": corpus, "data": tmp_path / "data-v2"}, epochs=1
    )
    config = load_config(str(new_data))
    config.train.lr = 1e-3
    run_training(config)
    assert read_payload(run / "last.pt")["run_identity"] not in (first, second)
    assert (run / "train.log").read_text().count("starting a new run") == 2
    assert len(epoch_ends(run)) == 1
    # New data, new tokenizer: losses are not comparable, so the gate compared validation BLEU.
    decision = _last_decision(run)
    assert decision["metric"] == "valid_bleu"
    assert decision["decision"] == "kept published (not better by 0.2 or more)"  # promote_margin_bleu
    assert (run / "published.pt").read_bytes() == published


def _last_decision(run) -> dict:
    return json.loads((run / "promotions.log").read_text().splitlines()[-1])
