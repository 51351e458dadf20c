"""cli_feedback.py: `tfm feedback add | list | accept | reject` on a config's store, and a run of
the config trains on what they accepted."""

from __future__ import annotations

import json

from helpers import run_tfm, write_config

from transformer_cli.cli_feedback import feedback


def test_feedback_adds_lists_accepts_and_the_next_run_trains_on_it(tmp_path, corpus_dir):
    cfg = write_config(
        tmp_path / "fix.yaml",
        tmp_path,
        corpus_dir,
        corrections={"store": str(tmp_path / "store"), "weight": 3},
        train={"epochs": 1},
    )
    fixes = tmp_path / "fixes.tsv"
    fixes.write_text("Ein Hund rennt .\tA dog runs .\nEin Baum .\tEin Baum .\n", encoding="utf-8")
    r = run_tfm("feedback", "add", str(fixes), "-c", str(cfg), "--client", "desk")
    assert r.returncode == 0, r.stderr
    assert "2 correction(s) added to" in r.stderr and ": 1 accepted, 1 held" in r.stderr
    r = run_tfm("feedback", "list", "--held", "-c", str(cfg))
    (held,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert held["reasons"] == ["the correction is the source itself"] and held["client"] == "desk"
    r = run_tfm("feedback", "accept", "nope", "-c", str(cfg))
    assert r.returncode == 2 and "no correction nope in" in r.stderr and len(r.stderr.splitlines()) == 1
    assert run_tfm("feedback", "accept", held["id"], "-c", str(cfg)).returncode == 0
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "checkpoints" / "fix" / "train.log").read_text()
    assert "corrections: 2 accepted from 1 client(s) (x3 an epoch), 0 held" in log
    assert "300 train pairs x1, 2 corrections pairs x3; 306 pairs an epoch" in log
    r = run_tfm("feedback", "list", "-c", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2
    plain = write_config(tmp_path / "plain.yaml", tmp_path, corpus_dir)
    r = run_tfm("feedback", "list", "-c", str(plain))
    assert r.returncode == 2 and "corrections.store is not set" in r.stderr


def test_the_feedback_group_has_its_four_commands():
    assert sorted(c.name or "" for c in feedback.registered_commands) == ["accept", "add", "list", "reject"]
