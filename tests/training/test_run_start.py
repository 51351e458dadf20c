"""What a session trains (training/run_start.py): a run that holds no train.retrain decision
but whose last.pt is of the same run (begun by an earlier tfm, or under policy: fixed) goes on
as it began. (The decisions themselves, end to end: test_retrain_policy.py.)"""

from __future__ import annotations

from pathlib import Path

from transformer_cli.checkpoint import Checkpoint, TrainState
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.run_start import begun_without_decision


def _state(path: Path, identity: str, finished: bool) -> None:
    Checkpoint(
        "transformer",
        10,
        10,
        {},
        {},
        {},
        run_identity=identity,
        train_state=TrainState({"finished": finished}, {}, {}, [], 1),
    ).write(path)


def test_a_run_begun_without_a_decision_is_recognised_by_its_last_state(tmp_path):
    run = RunDir(tmp_path)
    assert begun_without_decision(run, "this") is None  # nothing saved: a new run
    _state(run.last, "this", finished=False)
    assert begun_without_decision(run, "this") is False  # half-way: it goes on as it began
    assert begun_without_decision(run, "other") is None  # another run's state: a new run
    _state(run.last, "this", finished=True)
    assert begun_without_decision(run, "this") is True  # finished: a no-op, as any
    run.last.write_bytes(run.last.read_bytes()[:100])  # damaged: the one before it counts
    _state(run.last_prev, "this", finished=False)
    assert begun_without_decision(run, "this") is False
