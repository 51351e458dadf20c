"""data/folder_lock.py: a prepared data folder is not rebuilt under a process that reads it,
and a process that arrives during a rebuild waits for it (real processes, real flock)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from helpers import run_tfm, write_config

from transformer_cli.data.folder_lock import hold_shared, lock_file


def _holder(script: str) -> subprocess.Popen[str]:
    """A Python process that runs `script`, prints "held", then waits for a line on stdin."""
    code = textwrap.dedent(script) + "\nprint('held', flush=True)\nimport sys; sys.stdin.readline()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdin and proc.stdout and proc.stderr  # (all three piped)
    assert proc.stdout.readline().strip() == "held", proc.stderr.read()
    return proc


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin and proc.stderr  # (piped by _holder)
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0, proc.stderr.read()


def test_a_rebuild_is_refused_while_another_process_reads_the_folder(tmp_path, corpus_dir):
    cfg = write_config(tmp_path / "c.yaml", tmp_path, corpus_dir)
    assert run_tfm("preprocess", "-c", str(cfg)).returncode == 0
    manifest = tmp_path / "data" / "c" / "manifest.json"
    before = manifest.read_bytes()
    reader = _holder(f"""
        from transformer_cli.config_loading import load_config
        from transformer_cli.data.prepared import load_prepared
        load_prepared(load_config({str(cfg)!r}), hold=True)  # as every rank of a tfm train
    """)
    try:
        busy = run_tfm("preprocess", "-c", str(cfg), "--force")
        # Using the folder as it is goes on beside the reader.
        shared = run_tfm("preprocess", "-c", str(cfg))
    finally:
        _release(reader)
    assert busy.returncode == 75, busy.stderr
    errors = [line for line in busy.stderr.splitlines() if line.startswith("tfm: error:")]
    assert len(errors) == 1 and errors == busy.stderr.strip().splitlines()[-1:], busy.stderr
    assert f"cannot rebuild {tmp_path / 'data' / 'c'}: another tfm process" in errors[0]
    assert manifest.read_bytes() == before  # untouched
    assert shared.returncode == 0, shared.stderr
    rebuilt = run_tfm("preprocess", "-c", str(cfg), "--force")  # the reader has gone
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert manifest.read_bytes() != before


def test_holds_are_counted_and_the_last_release_unlocks(tmp_path, corpus_dir):
    """In one process: prepare() without `hold` lets go when it returns (a library caller
    keeps nothing locked), and nested holds keep the folder until the last is released."""
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.folder_lock import release
    from transformer_cli.data.preprocess import prepare

    cfg = load_config(str(write_config(tmp_path / "c.yaml", tmp_path, corpus_dir)))
    prepare(cfg)
    assert run_tfm("preprocess", "-c", str(tmp_path / "c.yaml"), "--force").returncode == 0
    prepare(cfg, hold=True)
    hold_shared(cfg.data_dir)
    release(cfg.data_dir)
    assert run_tfm("preprocess", "-c", str(tmp_path / "c.yaml"), "--force").returncode == 75
    release(cfg.data_dir)
    assert run_tfm("preprocess", "-c", str(tmp_path / "c.yaml"), "--force").returncode == 0


def test_a_reader_waits_for_a_rebuild_in_progress(tmp_path):
    folder = tmp_path / "data" / "c"
    writer = _holder(f"""
        from pathlib import Path
        from transformer_cli.data.folder_lock import rebuilding
        block = rebuilding(Path({str(folder)!r}))
        block.__enter__()
    """)
    started = time.monotonic()
    threading.Timer(1.0, lambda: (writer.stdin.write("\n"), writer.stdin.flush())).start()
    hold_shared(folder)  # returns once the writer has let go
    waited = time.monotonic() - started
    assert writer.wait(timeout=30) == 0, writer.stderr.read()
    assert waited >= 0.9
    assert lock_file(folder) == tmp_path / "data" / ".c.lock" and lock_file(folder).is_file()
