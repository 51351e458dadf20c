"""`tfm export` never leaves a half-written or deleted folder: an output it cannot write is one
line (exit 1), a stop signal abandons the export and removes its work folder (exit 128+N), and
the work folder of a killed export is removed by the next one."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from helpers import ct2_export, forks, untrained_checkpoint
from typer.testing import CliRunner
from zygote import Zygote

from transformer_cli.cli import app
from transformer_cli.export.manifest import MANIFEST

# Big enough (16 MB) that its export takes a good fraction of a second after the work folder
# appears, small enough to write in a fraction of one.
MEDIUM = {"d_model": 256, "n_heads": 4, "d_ff": 512, "n_encoder_layers": 3, "n_decoder_layers": 3}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return untrained_checkpoint(tmp_path_factory.mktemp("export-safety") / "medium.pt", None, **MEDIUM)


def _unwritable(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """An --output that cannot be written, and the reason tfm should give."""
    if kind == "under a file":
        (tmp_path / "notes.txt").write_text("a file, not a folder")
        return tmp_path / "notes.txt" / "export", f"File exists: {tmp_path / 'notes.txt'}"
    if kind == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("running as root, whom a read-only mode does not stop (see /proc)")
        (tmp_path / "ro").mkdir(mode=0o555)
        return tmp_path / "ro" / "export", "Permission denied"
    return Path("/proc/tfm-test-export"), "No such file or directory"  # procfs takes no folders


@pytest.mark.parametrize("kind", ["under a file", "read-only folder", "/proc"])
def test_an_output_that_cannot_be_written_is_one_line(kind, checkpoint, tmp_path):
    output, reason = _unwritable(kind, tmp_path)
    r = CliRunner().invoke(app, ["export", "--checkpoint", str(checkpoint), "--output", str(output)])
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr == f"tfm: error: cannot write {output}: {reason}\n"


def _signal_mid_export(zygote: Zygote, checkpoint: Path, output: Path, signum: int) -> tuple[int, str, Path]:
    """Run `tfm export` (a fork with the imports done, so that the signal lands in the export)
    and send it `signum` once it has started writing: its exit code, stderr and work folder."""
    log = output.with_name(f"{output.name}-{signum}.err")
    pid = zygote.start("export", "--checkpoint", str(checkpoint), "--output", str(output), log_to=log)
    work = output.with_name(f".{output.name}.tmp-{pid}")
    deadline = time.monotonic() + 120
    while not work.exists():
        assert time.monotonic() < deadline, f"no work folder: {log.read_text()}"
        time.sleep(0.001)
    os.kill(pid, signum)
    code = zygote.wait(pid)
    stderr = log.read_text()
    log.unlink()
    return code, stderr, work


def test_a_stopped_export_leaves_nothing_and_a_killed_ones_work_folder_goes_next_time(checkpoint, tmp_path):
    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    kept = tmp_path / "kept"  # an earlier export, which the stopped ones must leave as it was
    ct2_export(tiny, kept)
    before = (kept / MANIFEST).read_text()
    killed = tmp_path / "killed"
    zygote = forks()
    stopped = {
        signum: _signal_mid_export(zygote, checkpoint, kept, signum) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    code, stderr, work = _signal_mid_export(zygote, checkpoint, killed, signal.SIGKILL)
    for signum, (code_, stderr_, work_) in stopped.items():
        assert (code_, stderr_) == (
            128 + signum,
            f"tfm: error: stopped by signal {signum} during export; nothing was written to {kept}\n",
        )
        assert not work_.exists()
    assert (kept / MANIFEST).read_text() == before and "checkpoint" in json.loads(before)

    assert code == -signal.SIGKILL and work.is_dir()  # nothing could clean up
    ct2_export(tiny, killed)  # the next export to that folder removes the dead one's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "killed", "tiny.pt"]


@pytest.mark.parametrize("fmt", ["ctranslate2", "hf"])
def test_an_export_removes_dead_work_folders_of_every_name_beside_it(fmt, tmp_path):
    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have this id
    (tmp_path / "kept").mkdir()
    folders = {
        ".other.tmp": dead,
        ".kept.old": dead,  # removed: another name's work, an old copy
        ".gone.old": dead,  # put back: its process died between its two renames
        ".busy.tmp": os.getppid(),
    }  # a live process's: left alone
    for name, pid in folders.items():
        (tmp_path / f"{name}-{pid}").mkdir()
        (tmp_path / f"{name}-{pid}" / "model.bin").write_bytes(b"half")
    r = CliRunner().invoke(
        app, ["export", "--checkpoint", str(tiny), "--format", fmt, "--output", str(tmp_path / "new")]
    )
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".busy.tmp-{os.getppid()}", "gone", "kept", "new", "tiny.pt"]
    assert (tmp_path / "gone" / "model.bin").read_bytes() == b"half"
