"""machine.py: the CPUs this process may run on: its affinity (taskset, container CPU sets),
at least one, without torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from transformer_cli.host import machine
from transformer_cli.host.machine import available_cpus


def test_the_cpus_are_this_processs_affinity():
    assert available_cpus() == len(os.sched_getaffinity(0)) >= 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_narrower_affinity_is_respected():
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
    code += "from transformer_cli.host.machine import available_cpus; import sys; "
    code += "print(available_cpus(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "False"]


def test_without_an_affinity_it_counts_the_cpus(monkeypatch):
    def unsupported(pid: int) -> set[int]:
        raise AttributeError("not Linux")

    monkeypatch.setattr(machine.os, "sched_getaffinity", unsupported)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: None)
    assert available_cpus() == 1
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 6)
    assert available_cpus() == 6
