"""Which malloc tfm's long-running commands start on (transformer_cli/allocator.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_tfm

from transformer_cli.errors import UsageError
from transformer_cli.host import allocator

# glibc's own preloadable malloc wrapper (glibc >= 2.34): a real library to preload in tests
# on machines where no faster allocator is installed.
MALLOC_DEBUG = Path("/usr/lib") / f"{os.uname().machine}-linux-gnu" / "libc_malloc_debug.so.0"
PROBE = (
    "import os; from transformer_cli.host import allocator; allocator.restart_with_preferred(); "
    "print(os.environ.get('LD_PRELOAD', '')); print(os.getpid()); "
    "print(open('/proc/self/maps').read().count('{name}') > 0)"
)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", allocator.PRELOADED_ENV)}
    return {**env, **extra}


def test_system_means_no_library(monkeypatch):
    monkeypatch.setenv(allocator.ENV, "system")
    assert allocator.found() is None


def test_a_named_library_is_taken_as_given(monkeypatch, tmp_path):
    lib = tmp_path / "libmine.so"
    lib.write_bytes(b"")
    monkeypatch.setenv(allocator.ENV, str(lib))
    assert allocator.found() == lib.resolve()


def test_a_missing_library_is_one_line_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(allocator.ENV, str(tmp_path / "nope.so"))
    with pytest.raises(UsageError, match=r"TFM_ALLOCATOR=.*nope\.so: no such file"):
        allocator.found()


def test_tfm_train_with_a_missing_allocator_exits_2_in_one_line(tmp_path):
    r = run_tfm("train", "-c", "tiny.yaml", env=_clean_env(TFM_ALLOCATOR=str(tmp_path / "nope.so")))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"tfm: error: TFM_ALLOCATOR={tmp_path / 'nope.so'}: no such file (give a shared library's "
        "path, or 'system' for the C library's malloc)"
    ]


@pytest.mark.skipif(not MALLOC_DEBUG.is_file(), reason="no libc_malloc_debug.so.0 to preload here")
def test_restart_preloads_the_library_in_the_same_process_once():
    """The process re-executes itself (same PID, same arguments) with the library preloaded
    and mapped, and the restarted process does not restart again."""
    probe = PROBE.format(name="libc_malloc_debug")
    proc = subprocess.Popen(
        [sys.executable, "-c", probe],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_clean_env(TFM_ALLOCATOR=str(MALLOC_DEBUG)),
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.splitlines() == [str(MALLOC_DEBUG.resolve()), str(proc.pid), "True"]


def test_a_program_that_runs_tfm_main_itself_restarts_into_tfm_not_into_itself():
    """A harness (forked test zygote, embedding script) sets sys.argv and calls cli.main()."""
    harness = (
        "import sys; from transformer_cli import cli; print('harness ran', flush=True); "
        "sys.argv = ['tfm', 'train', '--help']; cli.main()"
    )
    r = subprocess.run(
        [sys.executable, "-c", harness],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(TFM_ALLOCATOR=str(MALLOC_DEBUG)),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("harness ran") == 1
    assert "--config" in r.stdout  # `tfm train --help` ran after the restart


def test_no_restart_when_told_system_or_already_restarted():
    for extra in ({"TFM_ALLOCATOR": "system"}, {allocator.PRELOADED_ENV: "/x.so"}):
        r = subprocess.run(
            [sys.executable, "-c", PROBE.format(name="libmimalloc")],
            capture_output=True,
            text=True,
            timeout=60,
            env=_clean_env(**extra),
        )
        assert r.returncode == 0, r.stderr
        preload, _, mapped = r.stdout.splitlines()
        assert (preload, mapped) == ("", "False")


def test_in_use_names_glibc_in_a_plain_process():
    r = subprocess.run(
        [sys.executable, "-c", "from transformer_cli.host import allocator; print(allocator.in_use())"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(),
    )
    assert r.stdout.strip() == "glibc"


def test_every_install_on_linux_brings_mimalloc():
    """A plain `pip install tfm` (no extra) has the allocator that keeps memory flat, and the
    training and serving processes preload it."""
    import sys
    from importlib import metadata

    requirements = metadata.requires("tfm") or []
    assert any(r.startswith("cmeel-mimalloc") and "extra ==" not in r for r in requirements), requirements
    if sys.platform == "linux":
        from transformer_cli.host import allocator

        assert allocator.found() is not None  # found without TFM_ALLOCATOR
