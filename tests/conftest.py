from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import write_corpus

# CI points TFM_DATA_SOURCE at the real Multi30k folder. Read it once here: every test then
# runs without it (autouse fixture below) and only the real-data tests pass it on.
REAL_MULTI30K = os.environ.get("TFM_DATA_SOURCE")


@pytest.fixture(autouse=True)
def _no_env_source(monkeypatch):
    """Tests choose their data source explicitly; the CI's real-data folder must not leak in."""
    monkeypatch.delenv("TFM_DATA_SOURCE", raising=False)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The real Multi30k folder named by TFM_DATA_SOURCE (CI sets it), else skip."""
    if not REAL_MULTI30K or not Path(REAL_MULTI30K).is_dir():
        pytest.skip("TFM_DATA_SOURCE does not name a Multi30k folder: real-data tests skipped")
    return Path(REAL_MULTI30K).resolve()  # the tests run tfm from their own folders


@pytest.fixture(scope="session")
def trained(tmp_path_factory, corpus_dir):
    """A small model trained once through `tfm train` on the synthetic corpus (~15 s), once per
    session under pytest-xdist too (helpers.built_once). Tests only read the run (or copy it)."""
    from helpers import built_once, run_tfm, write_config

    with built_once(tmp_path_factory, "trained") as (work, built):
        cfg, stderr = work / "toy.yaml", work / "train.stderr"
        if not built:
            write_config(
                cfg,
                work,
                corpus_dir,
                model={"d_model": 64, "n_heads": 4, "d_ff": 128},
                train={
                    "epochs": 10,
                    "lr": 3e-3,
                    "schedule": "inverse_sqrt",
                    "schedule_options": {"warmup_steps": 30},
                    "batch_size": 32,
                },
            )
            r = run_tfm("train", "--config", str(cfg))
            assert r.returncode == 0, r.stderr
            stderr.write_text(r.stderr)
    return {"config": cfg, "run": work / "checkpoints" / "toy", "work": work, "stderr": stderr.read_text()}


# Fixtures that train models or start tfm processes: a test that uses one (directly or through
# another fixture) is slow, wherever it lives. Tests that train without them carry
# @pytest.mark.slow themselves. `-m "not slow"` runs the fast tier.
SLOW_FIXTURES = {"trained", "models", "cron_data", "tfm_fork", "start_server", "multi30k_dir"}


# Modules whose assertions bound wall-clock time (a stop within seconds, a latency, torchrun's
# 30 s escalation) or read the machine's load: they run alone, after the rest, when
# scripts/test.sh runs the suite in two phases (--phase parallel with pytest-xdist, then
# --phase serial); a plain `pytest` runs everything in one process as before.
SERIAL_MODULES = {
    "tests/training/test_ddp.py",
    "tests/reliability/test_signals.py",
    "tests/reliability/test_stop_promptly.py",
    "tests/reliability/test_launch.py",
    "tests/reliability/test_shared_machine.py",
    "tests/serving/test_serve_load.py",
    "tests/serving/test_admission_bound.py",
    "tests/serving/test_serve_defects.py",
    "tests/serving/test_corrections_loop.py",
    "tests/test_threads.py",
}


def pytest_addoption(parser):
    parser.addoption(
        "--phase",
        choices=("all", "parallel", "serial"),
        default="all",
        help="all tests (the default), or those that may run beside others (parallel: give "
        "-n 2) or the timed ones that run alone (serial); scripts/test.sh runs both",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    phase = config.getoption("--phase")
    if phase == "all":
        return
    root = Path(config.rootpath)
    kept, deselected = [], []
    for item in items:
        serial = item.path.relative_to(root).as_posix() in SERIAL_MODULES
        (kept if serial == (phase == "serial") else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
