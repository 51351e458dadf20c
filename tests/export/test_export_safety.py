"""`tfm export` never leaves a half-written or deleted folder: an output it cannot write is one
line (exit 1), a stop signal abandons the export and removes its work folder (exit 128+N), also
when the code it lands in makes another exception of it or drops it, and the work folder of a
killed export is removed by the next one."""

from __future__ import annotations

import errno
import json
import os
import signal
import textwrap
import time
from pathlib import Path

import pytest
from helpers import ct2_export, forks, untrained_checkpoint
from typer.testing import CliRunner
from zygote import Zygote

from transformer_cli.cli import app
from transformer_cli.export_manifest import MANIFEST

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


# Two export formats whose export, mid-write, waits for the test inside code that a stop signal's
# exception passes through badly: the first makes another exception of it, as pybind11 does of one
# raised while its extension module initialises (SentencePiece's, imported by the first export
# of a subword model right after its work folder appears: under load, `tfm export` stopped there
# said `internal error: ImportError: initialization failed`); the second is a weakref callback,
# whose exception Python reports and drops, as it does in importlib's module-lock callbacks. Each
# waits by reading the FIFO OUTPUT.gate, which the test opens once the export has it open, then
# signals the export, then closes: the signal lands in that read.
PLUGIN = """
import weakref

from transformer_cli.contracts.exporter import Exporter
from transformer_cli.export_manifest import ExportManifest
from transformer_cli.fsutil import atomic_write_folder
from transformer_cli.seams import EXPORTERS


def wait_for_the_test(output):
    with open(output.with_name(output.name + ".gate"), "rb") as gate:
        gate.read()


class Waiting(Exporter):
    engine = "waiting"

    def __init__(self, drops):
        self.drops = drops

    def export(self, model, source, output, options):
        written = []

        def build(folder):
            (folder / "model.pt").write_bytes(source.read_bytes())
            if self.drops:
                held = type("Held", (), {})()
                ref = weakref.ref(held, lambda ref: wait_for_the_test(output))
                del held  # its callback runs now
            else:
                try:
                    wait_for_the_test(output)
                except BaseException as e:
                    raise ImportError("initialization failed") from e
            written.append(ExportManifest.new(self.engine, source, model, folder))
            written[0].write(folder)

        atomic_write_folder(output, build)
        return written[0], 0.0


EXPORTERS.register("waiting_wraps", Waiting(drops=False))
EXPORTERS.register("waiting_drops", Waiting(drops=True))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("fmt", ["waiting_wraps", "waiting_drops"])
def test_a_stop_is_a_stop_whatever_the_code_it_lands_in_makes_of_it(fmt, signum, tmp_path):
    tiny = untrained_checkpoint(tmp_path / "tiny.pt")
    (tmp_path / "waiting.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    (tmp_path / "plugged.yaml").write_text("plugins: [waiting.py]\n", encoding="utf-8")
    output, log = tmp_path / "out", tmp_path / "export.err"
    os.mkfifo(tmp_path / "out.gate")
    zygote = forks()
    pid = zygote.start(
        "export",
        "-c",
        str(tmp_path / "plugged.yaml"),
        "--checkpoint",
        str(tiny),
        "--format",
        fmt,
        "-o",
        str(output),
        log_to=log,
    )
    deadline = time.monotonic() + 120
    while True:  # until the export has the gate open for reading, which it then reads
        assert zygote.exit_code(pid) is None and time.monotonic() < deadline, log.read_text()
        try:
            gate = os.open(tmp_path / "out.gate", os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            assert e.errno == errno.ENXIO  # no reader yet
            time.sleep(0.005)
    os.kill(pid, signum)
    os.close(gate)  # (a signal that comes as its read starts, before it blocks, is handled as it ends)
    code = zygote.wait(pid, timeout=120)
    if fmt == "waiting_wraps":  # abandoned
        outcome = f"during export; nothing was written to {output}"
        assert not output.exists()
    else:  # the stop was dropped, so the export ran on to its end
        outcome = f"at the end of the export; {output} was written in full"
        assert sorted(p.name for p in output.iterdir()) == ["model.pt", MANIFEST]
    assert (code, log.read_text()) == (128 + signum, f"tfm: error: stopped by signal {signum} {outcome}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["export.err", "out.gate", "plugged.yaml", "tiny.pt", "waiting.py"] + ["out"] * (fmt == "waiting_drops")
    )


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
