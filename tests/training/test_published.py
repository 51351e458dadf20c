"""published.pt's files (training/published.py): promotions.log read back past a damaged line,
published.history/ kept to its newest models, restored from the newest readable one, listed."""

from __future__ import annotations

import json
import time

from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.training.published import (
    archive,
    decisions,
    describe_published,
    history,
    readable,
    record,
    restore_from_history,
    verified_published,
)
from transformer_cli.training.run_dir import RunDir


def _run(tmp_path) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.create()
    return run


def test_promotions_log_is_read_back_past_a_damaged_line(tmp_path):
    run = _run(tmp_path)
    assert decisions(run) == []
    record(run, {"decision": "promoted (none published yet)"})
    with run.promotions.open("a") as f:
        f.write('{"decision": "half a line\n[1, 2]\n')  # a torn write, and JSON that is no entry
    record(run, {"decision": "kept published (it is better)"})
    assert [e["decision"] for e in decisions(run)] == ["promoted (none published yet)", "kept published (it is better)"]
    assert json.loads(run.promotions.read_text().splitlines()[0]) == {"decision": "promoted (none published yet)"}


def test_history_keeps_the_newest_and_restores_the_newest_readable(tmp_path):
    run = _run(tmp_path)
    models = [untrained_checkpoint(tmp_path / f"m{i}.pt", d_model=32 + 8 * i) for i in range(3)]
    for path in models:  # each published in turn, then replaced
        run.published.write_bytes(path.read_bytes())
        archive(run, Checkpoint.read(run.published), keep=2)
        time.sleep(1.1)  # the archive's name holds the second it was taken
    kept = history(run)
    assert len(kept) == 2 and [p.read_bytes() for p in kept] == [models[2].read_bytes(), models[1].read_bytes()]
    kept[0].write_bytes(b"not a checkpoint")
    assert not readable(kept[0]) and readable(kept[1])
    run.published.write_bytes(b"damaged")
    assert verified_published(run) == (None, True)
    assert not run.published.exists() and (run.path / "published.pt.damaged").read_bytes() == b"damaged"
    assert restore_from_history(run) == kept[1].name  # the damaged newest is skipped
    assert run.published.read_bytes() == models[1].read_bytes() and not kept[1].exists()
    listing = describe_published(run).splitlines()
    assert listing[0].startswith(f"published {run.published}  sha256 ")
    assert listing[1].startswith(f"earlier   {kept[0]}: ")
