"""Damaged, hostile and unwritable checkpoints: recover when possible, fail in one line when not."""

from __future__ import annotations

import errno
import os
import pickle
import resource
import subprocess
import sys

import pytest
import torch
from reliability.cron_helpers import (
    checkpoint_files,
    epoch_ends,
    error_lines,
    progress,
    run_dir,
    temp_leftovers,
    write_cron_config,
)

from transformer_cli.checkpoint import CheckpointError, read_payload, write_payload
from transformer_cli.config_loading import load_config
from transformer_cli.errors import TfmError, UsageError
from transformer_cli.training.session import run_training


def _damage(path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: len(data) // 2]
    else:  # overwrite bytes in the middle (the weights)
        mid = len(data) // 2
        data[mid : mid + 64] = bytes(b ^ 0xFF for b in data[mid : mid + 64])
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        read_payload(path)


def _interrupted_run(cfg_path, max_steps: int = 15):
    """A run stopped mid-epoch 2 (max_steps reached): last.pt at step 15, last.prev.pt at step 10."""
    cfg = load_config(str(cfg_path))
    cfg.train.max_steps = max_steps
    run_training(cfg)
    run = run_dir(cfg_path)
    assert progress(run / "last.pt")["step"] == max_steps
    assert progress(run / "last.prev.pt")["step"] == 10
    return run


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cron_data):
    """Epoch-end numbers of the same config trained without any interruption."""
    cfg = write_cron_config(tmp_path_factory.mktemp("reference"), cron_data, epochs=3)
    run_training(load_config(str(cfg)))
    return epoch_ends(run_dir(cfg))


def test_damaged_last_pt_resumes_from_last_prev_pt(tmp_path, make_config, reference, tfm_fork):
    cfg = make_config("damaged", epochs=3)
    run = _interrupted_run(cfg)
    _damage(run / "last.pt", "flip")
    # A capped session first, so we can look at the state right after the first new save.
    [r] = tfm_fork.run_all(tmp_path, ("train", "-c", str(cfg), "--set", "train.max_steps=12"))
    assert r.returncode == 0, r.stderr
    assert "last.pt is damaged" in r.stderr and f"resuming from {run / 'last.prev.pt'}" in r.stderr
    assert "resuming at epoch 2, step 10" in r.stderr
    assert f"moved the damaged checkpoint aside to {run / 'last.pt.damaged'}" in r.stderr
    # The good fallback was not replaced by the damaged file: both checkpoints load.
    assert progress(run / "last.pt")["step"] == 12 and progress(run / "last.prev.pt")["step"] == 10
    run_training(load_config(str(cfg)))  # the nightly command, uncapped
    assert epoch_ends(run) == reference  # resuming from the older checkpoint lost nothing
    for path in checkpoint_files(run):
        read_payload(path)


def test_both_checkpoints_damaged_starts_over(tmp_path, make_config, reference, tfm_fork):
    cfg = make_config("both", epochs=3)
    run = _interrupted_run(cfg)
    published = (run / "published.pt").read_bytes()
    _damage(run / "last.pt", "truncate")
    _damage(run / "last.prev.pt", "flip")
    [r] = tfm_fork.run_all(tmp_path, ("train", "-c", str(cfg)))
    assert r.returncode == 0, r.stderr
    assert "last.pt is damaged" in r.stderr and "last.prev.pt is damaged" in r.stderr
    assert "no readable checkpoint" in r.stderr and "starting over" in r.stderr
    assert ": starting on cpu" in r.stderr
    assert epoch_ends(run) == reference  # a clean start reproduces the reference exactly
    for path in checkpoint_files(run):
        read_payload(path)
    assert (run / "published.pt").read_bytes() != published  # promoted: better than step 15's


class _Exploit:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_by_train_and_translate(tmp_path, make_config, tfm_fork):
    cfg = make_config("evil", epochs=1)
    run = run_dir(cfg)
    run.mkdir(parents=True)
    markers = [tmp_path / "pwned-by-last", tmp_path / "pwned-by-model"]
    torch.save({"format": "tfm-checkpoint/1", "x": _Exploit(markers[0])}, run / "last.pt")
    evil_model = tmp_path / "evil.pt"
    with open(evil_model, "wb") as f:  # a plain pickle, not even a torch zip
        pickle.dump({"model": _Exploit(markers[1])}, f)
    train, translate = tfm_fork.run_all(
        tmp_path,
        ("train", "-c", str(cfg), "--quiet"),
        ("translate", "--checkpoint", str(evil_model), "--device", "cpu", "Hallo"),
    )
    for r, path in ((train, run / "last.pt"), (translate, evil_model)):
        assert r.returncode == 2, r.stderr
        [line] = error_lines(r.stderr)
        assert line.startswith("tfm: error: refusing to load") and str(path) in line
        assert "Traceback" not in r.stderr
    assert len(train.stderr.strip().splitlines()) == 1  # --quiet: the error is all there is
    assert not any(m.exists() for m in markers)  # the payload never ran
    with pytest.raises(UsageError, match="refusing to load"):
        read_payload(run / "last.pt")


class _PowerCut(BaseException):
    pass


def test_crash_while_rotating_last_pt_never_leaves_it_missing(make_config, monkeypatch):
    """save_last() moves last.pt to last.prev.pt, then renames the new file in. A crash between
    the two steps must still leave a last.pt (the old one), not only a last.prev.pt."""
    cfg = make_config("rotate", epochs=1)
    run = run_dir(cfg)
    run_training(load_config(str(cfg)))
    old_last = (run / "last.pt").read_bytes()
    payload = read_payload(run / "last.pt")
    real_replace = os.replace

    def cut_power_before_the_new_file_lands(src, dst):
        if str(dst) == str(run / "last.pt"):
            raise _PowerCut
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", cut_power_before_the_new_file_lands)
    with pytest.raises(_PowerCut):
        write_payload(run / "last.pt", payload, keep_previous=run / "last.prev.pt")
    monkeypatch.undo()
    assert (run / "last.pt").read_bytes() == old_last
    assert (run / "last.prev.pt").read_bytes() == old_last
    for path in checkpoint_files(run):
        read_payload(path)


def _snapshot(run):
    return {p.name: p.read_bytes() for p in run.glob("*.pt")}


@pytest.mark.parametrize("fail_at", [1, 2])
def test_failed_save_keeps_the_old_checkpoints_and_says_so_in_one_line(make_config, monkeypatch, fail_at):
    cfg_path = make_config("full", epochs=1)
    run = run_dir(cfg_path)
    run_training(load_config(str(cfg_path)))
    before = _snapshot(run)
    assert {"best.pt", "last.pt", "published.pt"} <= set(before)
    calls = []
    real_save = torch.save

    def disk_full_on_nth_save(obj, f, *args, **kwargs):
        calls.append(1)
        if len(calls) >= fail_at:
            f.write(b"x" * 1000)  # a partial write first, as a filling disk does
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", disk_full_on_nth_save)
    cfg = load_config(str(cfg_path))
    cfg.train.epochs = 3  # more epochs tonight; its first save (best.pt) or its second fails
    with pytest.raises(TfmError) as caught:
        run_training(cfg)
    failed = "best.pt" if fail_at == 1 else "last.pt"
    message = str(caught.value)
    assert message == f"cannot write {run / failed}: No space left on device"
    assert "\n" not in message and caught.value.exit_code == 1  # a run-time failure in the CLI
    after = _snapshot(run)
    for name, data in before.items():
        if name == "best.pt" and fail_at == 2:
            assert after[name] != data  # the first save of the session had gone through
        else:
            assert after[name] == data, name  # untouched
        read_payload(run / name)
    assert temp_leftovers(run) == []
    monkeypatch.undo()
    outcome = run_training(cfg)  # space freed: the next run just continues
    assert outcome.trained and outcome.progress.epoch == 3


def test_disk_full_through_the_cli_exits_1_with_one_line(make_config):
    cfg = make_config("quota", epochs=1)
    run = run_dir(cfg)
    run_training(load_config(str(cfg)))
    before = _snapshot(run)
    limit = min(len(b) for b in before.values()) // 2  # small files fit, no checkpoint does

    def file_size_limit():  # the kernel fails writes past `limit` bytes with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run(
        [sys.executable, "-m", "transformer_cli", "train", "-c", str(cfg), "--quiet", "--set", "train.epochs=3"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=file_size_limit,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [f"tfm: error: cannot write {run / 'best.pt'}: File too large"]
    assert _snapshot(run) == before and temp_leftovers(run) == []
    for path in checkpoint_files(run):
        read_payload(path)
