"""synthetic/cache_folders.py: a cache folder another process holds is not removed; one nobody
holds is renamed away, then deleted, and what a crash left half deleted is never a cache."""

from __future__ import annotations

import subprocess
import sys

from transformer_cli.fsutil import close_lock
from transformer_cli.synthetic.cache_folders import IN_USE, REMOVED, remove, remove_leftovers, use

HOLD = """
import sys, time
from pathlib import Path
from transformer_cli.synthetic.cache_folders import use
fd = use(Path(sys.argv[1]), create=False)
print("held" if fd is not None else "none", flush=True)
sys.stdin.readline()
"""


def test_a_folder_another_process_holds_is_kept_and_removed_once_let_go(tmp_path):
    folder = tmp_path / "forward-abc"
    folder.mkdir()
    (folder / "lines.txt").write_text("x" * 1000)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert remove(folder) is None  # in use: left as it is
        assert (folder / "lines.txt").read_text() == "x" * 1000
    finally:
        holder.communicate("\n", timeout=30)
    assert remove(folder) == 1000  # its files' bytes (.in-use's are 0)
    assert not folder.exists() and not list(tmp_path.iterdir())
    assert remove(folder) == 0  # nothing there


def test_a_half_removed_folder_is_never_used_and_leftovers_are_deleted(tmp_path):
    away = tmp_path / f"{REMOVED}forward-abc-1234"
    away.mkdir()
    (away / "keys.u64").write_bytes(b"\0" * 8)
    assert use(tmp_path / "forward-abc", create=False) is None  # the cache's own name has nothing
    remove_leftovers(tmp_path)
    assert not away.exists()
    fd = use(tmp_path / "forward-new", create=True)
    assert fd is not None and (tmp_path / "forward-new" / IN_USE).is_file()
    close_lock(fd)
