"""The run from scratch behind the nights, as the nights see it (training/scratch_run.py): its
config, its scratch.json, and where it stands in a night's line; the window's deadline
(training/signals.py). End to end, with real `tfm train` processes: test_scratch.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.scratch_run import (
    STATE,
    State,
    read_state,
    scratch_config,
    scratch_dir,
    status,
    where,
    write_state,
)
from transformer_cli.training.signals import WINDOW_ENDED, GracefulStop, StopRequested


def _config(tmp_path: Path):
    path = write_config(tmp_path / "nightly.yaml", tmp_path, tmp_path / "corpus", train={"init_from": "published"})
    return load_config(str(path))


def test_the_run_from_scratch_is_the_nightly_config_without_a_parent_in_folders_of_its_own(tmp_path):
    cfg = _config(tmp_path)
    scfg = scratch_config(cfg)
    assert scfg.name == "nightly.scratch" and scfg.train.init_from is None
    assert scfg.run_dir == tmp_path / "checkpoints" / "nightly.scratch"
    assert scfg.data_dir == tmp_path / "data" / "nightly.scratch"
    assert cfg.train.init_from == "published" and cfg.name == "nightly"  # untouched
    assert cfg.train.retrain.scratch == "background" and cfg.train.retrain.scratch_priority == "idle"


def test_a_nights_line_says_where_the_run_from_scratch_stands(tmp_path):
    cfg = _config(tmp_path)
    run = scratch_dir(cfg)
    assert status(cfg) == (f"it trains in {run.path}, after this night, 240 minutes at a time at priority idle")
    state = State("growth 20% > 15%", "2024-05-01T02:00:00+00:00", "abc", stands="epoch 2 of 2, step 9")
    write_state(run, state)
    assert read_state(run) == state
    assert status(cfg) == (
        f"under way in {run.path} since 2024-05-01T02:00:00+00:00: epoch 2 of 2, step 9; it goes on "
        "after this night, 240 minutes at a time at priority idle"
    )
    assert where(scratch_config(cfg), "") == ""  # nothing prepared, nothing trained: nothing to say
    write_state(run, State("growth 20% > 15%", "t", "abc", outcome="kept published (it is better)"))
    assert status(cfg).startswith("the last one (kept aside: kept published (it is better)) is done; a new one")


@pytest.mark.parametrize("text", ["", "[]", '{"why": 1, "started": "t", "night_identity": "x"}', '{"why": "w"}'])
def test_an_unreadable_scratch_json_is_none(tmp_path, text):
    run = RunDir(tmp_path / "run")
    run.create()
    (run.path / STATE).write_text(text)
    assert read_state(run) is None


def test_a_deadline_stops_as_a_signal_does_once_it_has_passed():
    stop = GracefulStop()
    stop.check()  # no deadline: nothing
    stop.until(time.monotonic() + 60)
    stop.check()  # not yet
    stop.until(time.monotonic() - 1)
    with pytest.raises(StopRequested) as e:
        stop.check()
    assert e.value.signum == WINDOW_ENDED
