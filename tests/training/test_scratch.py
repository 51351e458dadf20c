"""The retrain from scratch behind the nights (training/scratch.py), with real `tfm train`
processes on a tiny corpus: a night whose policy calls for scratch publishes a continued model
and leaves the run from scratch started; the next night continues while it is unfinished; the
run resumes across invocations on the corpus as it began and goes through the gate when done
(promoted: the continued-run count starts again; else kept aside); one at a time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_tfm, sentence_pairs
from training.test_continued import first_night, grow, last_decision, nightly_config  # noqa: F401 (fixture)

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.training.scratch import behind_nights

pytestmark = pytest.mark.slow

WHO = "retrain from scratch behind the nights"
RETRAIN = {
    "policy": "adaptive",
    "max_epochs": 2,  # a night continues 2 epochs (train.continued.epochs) whatever the growth
    "max_continued_runs": 1,  # a night on a continued model calls for scratch again
    "scratch_window_minutes": 0.001,  # a step or so a night
    "scratch_priority": "low",  # (idle would let the other tests' processes starve it)
}


@pytest.fixture
def nights(first_night, tmp_path):  # noqa: F811
    """A copy of the first night's work (300 pairs published), under the policy of RETRAIN;
    the run from scratch trains 6 epochs (train.epochs)."""
    work = tmp_path / "work"
    shutil.copytree(first_night, work)
    cfg = nightly_config(work, work / "corpus", epochs=6, retrain=RETRAIN)
    return {"cfg": str(cfg), "corpus": work / "corpus", "run": work / "checkpoints" / "nightly", "work": work}


def _tfm(cfg: str, *options: str) -> subprocess.CompletedProcess:
    r = run_tfm("train", "-c", cfg, "--quiet", *options)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _lines(run: Path, text: str) -> list[str]:
    return [line.split(" INFO ", 1)[-1] for line in (run / "train.log").read_text().splitlines() if text in line]


def _state(scratch: Path) -> dict:
    return json.loads((scratch / "scratch.json").read_text())


def _step(path: Path) -> int:
    state = Checkpoint.read(path).train_state
    assert state is not None
    return int(state.progress["step"])


def test_only_the_nightly_adaptive_run_leaves_scratch_behind_it(tmp_path):
    cfg = load_config(str(nightly_config(tmp_path, tmp_path / "corpus", retrain=RETRAIN)))
    assert behind_nights(cfg)
    cfg.train.retrain.scratch = "foreground"
    assert not behind_nights(cfg)


def test_nights_go_on_while_the_run_from_scratch_trains_behind_them_then_it_is_promoted(nights):
    cfg, run = nights["cfg"], nights["run"]
    scratch = run.parent / "nightly.scratch"
    first = Checkpoint.read(run / "published.pt")

    # Night 1: +67% calls for scratch; the night continues the published model, publishes
    # through the gate, then the run from scratch starts behind it.
    grow(nights["corpus"], sentence_pairs(200, seed=7))
    _tfm(cfg)
    [line] = _lines(run, "continued training:")
    assert line == (
        "continued training: corpus grew 66.7% (300 -> 500 pairs), <unk> 0%, 0 continued runs since the last "
        "from scratch: continuing 2 epochs (2 epochs per +10% growth, 2 to 2); a retrain from scratch is due "
        f"(growth 66.7% > 15%): it trains in {scratch}, after this night, 0.001 minutes at a time at priority low"
    )
    last = Checkpoint.read(run / "last.pt")
    assert last.parent["sha256"] == first.sha256 and last.training["retrain"]["scratch_due"] == "growth 66.7% > 15%"
    assert last_decision(run)["retrain"]["decision"] == "continue"
    log = (run / "train.log").read_text()
    assert log.index("promotion: ") < log.index(f"{WHO}: starting in {scratch} (growth 66.7% > 15%)")
    state = _state(scratch)
    assert state["outcome"] is None and state["why"] == "growth 66.7% > 15%"
    step1 = _step(scratch / "last.pt")
    assert step1 >= 1 and not Checkpoint.read(scratch / "last.pt").train_state.progress["finished"]
    [over] = _lines(run, "minutes is over")
    assert over == f"{WHO}: its window of 0.001 minutes is over: epoch 1 of 6, step {step1}, on 500 pairs; " + (
        "saved, it goes on at the next tfm train (or tfm train --scratch)"
    )
    manifest = json.loads((run.parent.parent / "data" / "nightly.scratch" / "manifest.json").read_text())
    assert manifest.get("tokenizer_from") is None and manifest["splits"]["train"]["pairs"] == 500  # fitted
    assert "priority: nice 10, SCHED_BATCH" in (scratch / "train.log").read_text()

    # Night 2: the corpus grows again; the night continues (the run from scratch is unfinished,
    # and the line says where it stands), and the run from scratch goes on, on its 500 pairs.
    grow(nights["corpus"], sentence_pairs(50, seed=8))
    _tfm(cfg)
    line = _lines(run, "continued training:")[-1]
    assert "-> 550 pairs)" in line and "a retrain from scratch is due (" in line
    assert f"under way in {scratch} since {state['started']}: epoch 1 of 6, step {step1}, on 500 pairs" in line
    assert Checkpoint.read(run / "last.pt").training["train_pairs"] == 550
    step2 = _step(scratch / "last.pt")
    assert step2 > step1 and f"resuming at epoch 1, step {step1} " in (scratch / "train.log").read_text()

    # `tfm train --scratch` with a longer window: it resumes, finishes and goes through the gate.
    _tfm(cfg, "--scratch", "--set", "train.retrain.scratch_window_minutes=30", "--promote", "always")
    assert f"step {step2} " in (scratch / "train.log").read_text().split("resuming at epoch")[-1]
    published, best = Checkpoint.read(run / "published.pt"), Checkpoint.read(scratch / "best.pt")
    assert published.sha256 == best.sha256 and published.parent is None
    assert published.training == {"train_pairs": 500, "continued_runs": 0}  # the corpus as it began
    [promoted] = _lines(run, f"{WHO}: promoted")
    assert promoted.startswith(f"{WHO}: promoted (--promote always) -> {run / 'published.pt'}; it counts 0 ")
    entry = last_decision(run)
    assert entry["candidate_sha256"] == best.sha256
    assert entry["retrain"]["decision"] == "scratch" and entry["retrain"]["behind_nights"]
    assert _state(scratch)["promoted"] and _state(scratch)["outcome"] == "promoted (--promote always)"

    # Night 3 (no new pairs): the night continues the model from scratch, counted from 0, and
    # finds no retrain due; nothing is due or under way for `--scratch` either.
    _tfm(cfg)
    line = _lines(run, "continued training:")[-1]
    assert line.startswith("continued training: corpus grew 10% (500 -> 550 pairs), <unk> 0%, 0 continued runs")
    assert "is due" not in line
    assert Checkpoint.read(run / "last.pt").parent["sha256"] == best.sha256
    r = run_tfm("train", "-c", cfg, "--scratch")
    assert r.returncode == 0 and f"{WHO}: none is due or under way" in r.stderr
    assert _state(scratch)["outcome"] == "promoted (--promote always)"  # no new run started


def test_one_run_from_scratch_at_a_time_and_one_worse_than_published_is_kept_aside(nights):
    cfg, run = nights["cfg"], nights["run"]
    scratch = run.parent / "nightly.scratch"
    grow(nights["corpus"], sentence_pairs(200, seed=7))
    _tfm(cfg)  # night 1: the run from scratch starts

    # A `tfm train --scratch` with a long window trains it (a process of its own) ...
    long = ["--set", "train.retrain.scratch_window_minutes=30", "--set", "train.epochs=500"]
    first = subprocess.Popen(
        [sys.executable, "-m", "transformer_cli", "train", "-c", cfg, "--quiet", "--scratch", *long],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        _wait_for(lambda: "resuming at epoch" in (scratch / "train.log").read_text(), first)
        # ... a second one is refused at once, naming the holder ...
        second = run_tfm("train", "-c", cfg, "--quiet", "--scratch")
        assert second.returncode == 75, second.stderr
        assert f"is busy: another tfm train holds its lock (pid {first.pid})" in second.stderr
        # ... and a night goes on beside it, leaving the run from scratch to its holder.
        grow(nights["corpus"], sentence_pairs(50, seed=8))
        _tfm(cfg)
        line = _lines(run, "continued training:")[-1]
        assert "-> 550 pairs)" in line and f"under way in {scratch} since" in line
        assert _lines(run, f"{WHO}: run {scratch} is busy: another tfm train holds its lock (pid {first.pid})")
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err[-3000:]
    assert not Checkpoint.read(scratch / "last.pt").train_state.progress["finished"]  # saved to resume

    # Done, but worse than a floor the gate sets: kept aside, the published model stays.
    night = Checkpoint.read(run / "published.pt").sha256  # the continued night's, or the first
    _tfm(cfg, "--scratch", *long[:2], "--set", "train.epochs=1", "--set", "train.promote_min_bleu=100")
    [kept] = _lines(run, f"{WHO}: kept aside")
    # Kept aside by the floor, or, where the toy model lands below the published one, by the margin.
    assert kept.startswith(f"{WHO}: kept aside in {scratch / 'best.pt'} ("), kept
    assert "(kept out: greedy validation BLEU " in kept or "(not better by " in kept, kept
    assert Checkpoint.read(run / "published.pt").sha256 == night != Checkpoint.read(scratch / "best.pt").sha256
    state = _state(scratch)
    assert not state["promoted"] and state["outcome"].startswith(("kept out", "kept published"))
    # The latest night was judged against: nothing starts again until another night calls for it.
    r = run_tfm("train", "-c", cfg, "--scratch")
    assert r.returncode == 0 and f"{WHO}: none is due or under way" in r.stderr
    assert (scratch / "best.pt").is_file()


def _wait_for(ready, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError:
            pass
        if process.poll() is not None:
            raise AssertionError(
                f"exited {process.returncode}: {process.stderr.read()[-3000:] if process.stderr else ''}"
            )
        time.sleep(0.2)
    raise AssertionError("timed out")
