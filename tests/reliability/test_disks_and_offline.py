"""A full disk, a read-only run folder, and a nightly run with no network.

The disks are real: a small tmpfs mounted in a private mount namespace (`unshare`), filled to
a chosen level, with tfm running inside. Where unprivileged namespaces are not allowed the
disk tests are skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from reliability.cron_helpers import error_lines, run_dir, write_cron_config

from transformer_cli.checkpoint import read_payload


def _namespaces_work() -> bool:
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return r.returncode == 0


needs_namespaces = pytest.mark.skipif(
    shutil.which("unshare") is None or not _namespaces_work(), reason="unshare: no private mount namespaces here"
)


def _tfm_on_small_disk(
    mount: str, size_kb: int, free_kb: int | None, setup: str, *args: str, read_only: bool = False
) -> subprocess.CompletedProcess:
    """Run `tfm ARGS` with a `size_kb` tmpfs at `mount`, `setup` run on it first, then filled
    until `free_kb` remain (or remounted read-only). Afterwards stdout gets `LEFT:` and the
    names in `mount`/data (the tmpfs vanishes with the namespace)."""
    fill = (
        ""
        if free_kb is None
        else (
            f"avail=$(df -k --output=avail {mount} | tail -1); "
            f"head -c $(( (avail - {free_kb}) * 1024 )) /dev/zero > {mount}/filler 2>/dev/null || true; "
        )
    )
    script = (
        f"set -e; mount -t tmpfs -o size={size_kb}k tmpfs {mount}; {setup}; {fill}"
        + (f"mount -o remount,ro {mount}; " if read_only else "")
        + f'set +e; "$@"; code=$?; echo LEFT:; ls -A {mount}/data 2>/dev/null; exit $code'
    )
    return subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
            sys.executable,
            "-m",
            "transformer_cli",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


@needs_namespaces
@pytest.mark.parametrize("free_kb", [0, 4, 8, 24])
def test_a_full_disk_gives_one_line_naming_the_file_and_no_logging_traceback(tmp_path, cron_data, free_kb):
    mount = tmp_path / "disk"
    mount.mkdir()
    cfg = write_cron_config(tmp_path, cron_data, epochs=1)
    r = _tfm_on_small_disk(
        str(mount),
        256,
        free_kb,
        "true",
        "train",
        "-c",
        str(cfg),
        "--quiet",
        "--set",
        f"train.out_dir={mount}/checkpoints",
    )
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "Logging error" not in r.stderr
    assert "internal error" not in r.stderr
    lines = error_lines(r.stderr)
    assert 1 <= len(lines) <= 2, r.stderr  # the error, and at most one warning about train.log
    assert lines[-1].startswith(f"tfm: error: cannot write {mount}/checkpoints/cron/")
    assert lines[-1].endswith(": No space left on device")
    assert all(x.startswith("tfm: warning: cannot write") for x in lines[:-1])


@needs_namespaces
def test_a_full_disk_while_preprocessing_leaves_no_work_folder(tmp_path, cron_data):
    mount = tmp_path / "disk"
    mount.mkdir()
    cfg = write_cron_config(tmp_path, cron_data, epochs=1)
    r = _tfm_on_small_disk(
        str(mount), 512, 16, "true", "preprocess", "-c", str(cfg), "--quiet", "--set", f"data.dir={mount}/data"
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert error_lines(r.stderr) == [
        f"tfm: error: cannot write preprocessed data to {mount}/data/cron: No space left on device"
    ]
    # no work folder left on the full disk: only the (empty) lock file that guards data/cron
    assert r.stdout.split("LEFT:")[-1].split() == [".cron.lock"]


@needs_namespaces
def test_a_full_disk_while_continuing_a_run_keeps_its_checkpoints(tmp_path, finished):
    mount = tmp_path / "disk"
    mount.mkdir()
    run = f"{mount}/checkpoints/cron"
    r = _tfm_on_small_disk(
        str(mount),
        2048,
        8,
        f"mkdir -p {mount}/checkpoints; cp -a {finished['run']} {run}",
        "train",
        "-c",
        str(finished["config"]),
        "--quiet",
        "--set",
        f"train.out_dir={mount}/checkpoints",
        "--set",
        "train.epochs=3",
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert error_lines(r.stderr)[-1].endswith(": No space left on device")


@needs_namespaces
def test_a_read_only_run_folder_is_one_line_and_translate_still_works(tmp_path, finished):
    mount = tmp_path / "disk"
    mount.mkdir()
    setup = f"mkdir -p {mount}/checkpoints; cp -a {finished['run']} {mount}/checkpoints/cron"
    train = _tfm_on_small_disk(
        str(mount),
        2048,
        None,
        setup,
        "train",
        "-c",
        str(finished["config"]),
        "--set",
        f"train.out_dir={mount}/checkpoints",
        read_only=True,
    )
    assert train.returncode == 1, train.stderr
    assert error_lines(train.stderr) == [
        f"tfm: error: cannot open the lock file {mount}/checkpoints/cron/.lock: Read-only file system "
        "(tfm train needs a writable run directory; see train.out_dir)"
    ]
    translate = _tfm_on_small_disk(
        str(mount),
        2048,
        None,
        setup,
        "translate",
        "--checkpoint",
        f"{mount}/checkpoints/cron/published.pt",
        "Ein Mann sieht einen Ball.",
        read_only=True,
    )
    assert translate.returncode == 0 and translate.stdout.split("LEFT:")[0].strip(), translate.stderr


def test_offline_reruns_use_the_recorded_source_then_the_prepared_data(tmp_path, cron_data, tfm_fork):
    """Preprocess from a folder, then train with no source given (the cron line), then with the
    source unreachable: both train on the prepared data."""
    corpus = tmp_path / "corpus"
    shutil.copytree(cron_data["corpus"], corpus)
    cfg = write_cron_config(tmp_path, {**cron_data, "corpus": corpus, "data": tmp_path / "data"}, epochs=1)
    cfg.write_text(cfg.read_text().replace(f"source: {corpus}", "source: null"))
    [pre] = tfm_fork.run_all(tmp_path / "l0", ("preprocess", "-c", str(cfg), "--source", str(corpus)))
    assert pre.returncode == 0, pre.stderr
    [first] = tfm_fork.run_all(tmp_path / "l1", ("train", "-c", str(cfg)))
    assert first.returncode == 0, first.stderr
    assert f"using the source recorded by the last preprocess: {corpus}" in first.stderr

    unreachable = "http://127.0.0.1:9/corpus/"  # the discard port: connection refused at once
    [second] = tfm_fork.run_all(
        tmp_path / "l2", ("train", "-c", str(cfg), "--set", "train.epochs=2", "--set", f"data.source={unreachable}")
    )
    assert second.returncode == 0, second.stderr
    [warning] = [x for x in second.stderr.splitlines() if "download failed" in x]
    assert "warning:" in warning and f"using the preprocessed data in {tmp_path / 'data' / 'cron'}" in warning
    assert "resuming at epoch 2" in second.stderr
    assert read_payload(run_dir(cfg) / "last.pt")["train_state"]["progress"]["epoch"] == 2
