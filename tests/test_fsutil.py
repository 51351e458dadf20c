"""fsutil.py: atomic writes of files and folders; failures leave the old content and one line."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from transformer_cli.fsutil import (
    WriteError,
    atomic_torch_save,
    atomic_write,
    atomic_write_bytes,
    atomic_write_folder,
    atomic_write_json,
    remove_stale_temp_files,
    remove_stale_work_folders,
)


class _Interrupted(Exception):
    pass


def _temp_files(folder):
    return sorted(folder.glob(".*.tmp"))


def test_atomic_write_creates_and_replaces_with_the_usual_permissions(tmp_path):
    path = tmp_path / "sub" / "f.txt"
    atomic_write_bytes(path, b"one")
    atomic_write_bytes(path, b"two")
    assert path.read_bytes() == b"two" and _temp_files(path.parent) == []
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600


def test_a_failing_writer_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_bytes(path, b"old")

    def half_then_fail(f):
        f.write(b"new, half writ")
        raise _Interrupted

    with pytest.raises(_Interrupted):
        atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"old" and _temp_files(tmp_path) == []


def test_an_os_error_becomes_one_line_naming_the_path(tmp_path):
    path = tmp_path / "f.txt"

    def disk_full(f):
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteError) as caught:
        atomic_write(path, disk_full)
    assert str(caught.value) == f"cannot write {path}: No space left on device"
    assert not path.exists() and _temp_files(tmp_path) == []


def test_keep_previous_moves_the_old_file_aside(tmp_path):
    path, previous = tmp_path / "last.pt", tmp_path / "last.prev.pt"
    atomic_write_bytes(path, b"1")
    atomic_write(path, lambda f: f.write(b"2"), keep_previous=previous)
    assert path.read_bytes() == b"2" and previous.read_bytes() == b"1"
    atomic_write(tmp_path / "new.pt", lambda f: f.write(b"3"), keep_previous=tmp_path / "new.prev.pt")
    assert not (tmp_path / "new.prev.pt").exists()  # nothing to keep the first time


def test_json_and_torch_files(tmp_path):
    import torch

    atomic_write_json(tmp_path / "m.json", {"ü": 1})
    assert (tmp_path / "m.json").read_text(encoding="utf-8") == '{\n  "ü": 1\n}\n'
    atomic_torch_save(tmp_path / "t.pt", {"x": torch.ones(2)})
    assert torch.equal(torch.load(tmp_path / "t.pt", weights_only=True)["x"], torch.ones(2))


def test_stale_temp_files_are_removed_and_counted(tmp_path):
    (tmp_path / ".last.pt.abc123.tmp").write_bytes(b"partial")
    (tmp_path / "keep.pt").write_bytes(b"x")
    assert remove_stale_temp_files(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["keep.pt"]


def test_folders_are_replaced_whole(tmp_path):
    final = tmp_path / "prepared"
    atomic_write_folder(final, lambda d: (d / "a.txt").write_text("first"))
    atomic_write_folder(final, lambda d: (d / "b.txt").write_text("second"))
    assert [p.name for p in final.iterdir()] == ["b.txt"]  # nothing of the old folder is left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]  # no temp or old folders


def test_a_failing_folder_build_keeps_the_old_folder(tmp_path):
    final = tmp_path / "prepared"
    atomic_write_folder(final, lambda d: (d / "a.txt").write_text("first"))

    def fail(d):
        (d / "half.txt").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteError, match=f"cannot write {final}: No space left on device"):
        atomic_write_folder(final, fail)
    assert [p.name for p in final.iterdir()] == ["a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]


def _dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_work_folders_of_dead_processes_go_and_an_orphaned_old_folder_comes_back(tmp_path):
    dead, final = _dead_pid(), tmp_path / "export"
    (tmp_path / f".export.tmp-{dead}").mkdir()  # a killed writer's work folder: deleted
    (tmp_path / f".export.old-{dead}").mkdir()  # killed between its two renames: `final` again
    (tmp_path / f".export.old-{dead}" / "a.txt").write_text("the previous export")
    (tmp_path / f".export.tmp-{os.getppid()}").mkdir()  # a live writer's: left alone
    (tmp_path / f".other.tmp-{dead}").mkdir()  # another folder's: left alone
    assert remove_stale_work_folders(final) == 1
    assert (final / "a.txt").read_text() == "the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".export.tmp-{os.getppid()}", f".other.tmp-{dead}", "export"]
    (tmp_path / f".export.tmp-{dead}").mkdir()
    atomic_write_folder(final, lambda d: (d / "b.txt").write_text("new"))  # cleans up first
    assert [p.name for p in final.iterdir()] == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".export.tmp-{os.getppid()}", f".other.tmp-{dead}", "export"]


def test_a_folder_that_cannot_be_made_is_a_write_error_naming_it(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    final = tmp_path / "file" / "out"
    with pytest.raises(WriteError) as caught:
        atomic_write_folder(final, lambda d: None)
    assert str(caught.value) == f"cannot write {final}: File exists: {tmp_path / 'file'}"


def test_append_whole_lines_drops_a_cut_short_line_first(tmp_path):
    import os

    from transformer_cli.fsutil import append_whole_lines

    path = tmp_path / "log"
    path.write_bytes(b"one\ntw")  # a writer killed mid-line
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        append_whole_lines(fd, b"two\nthree\n")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"one\ntwo\nthree\n"
