"""training/averaging.py: the mean of checkpoints, the snapshots kept for it, and a run that
averages its last epochs and keeps the average only when it validates better (best.yaml)."""

from __future__ import annotations

import json
import logging
import math

import pytest
import torch
from training.test_train import make_trainer, small_config

from transformer_cli.checkpoint import Checkpoint, read_payload
from transformer_cli.training.averaging import Snapshots, average_state_dicts, trying_weights
from transformer_cli.training.session import run_training


def test_the_average_of_states_is_their_mean():
    states = [
        {
            "w": torch.full((2, 3), float(i)),
            "h": torch.full((2,), float(i), dtype=torch.bfloat16),
            "count": torch.tensor([i]),
        }
        for i in (1, 2, 6)
    ]
    averaged = average_state_dicts(states)
    assert torch.equal(averaged["w"], torch.full((2, 3), 3.0))
    assert averaged["h"].dtype == torch.bfloat16 and torch.equal(averaged["h"].float(), torch.full((2,), 3.0))
    assert torch.equal(averaged["count"], torch.tensor([6]))  # not floating point: the last one's


def _snapshot(epoch: int) -> Checkpoint:
    return Checkpoint("transformer", 10, 10, {"w": torch.full((3,), float(epoch))}, {}, {"model": {}}, {"epoch": epoch})


def test_snapshots_keep_the_last_ones_by_step_and_average_them(tmp_path):
    snapshots = Snapshots(tmp_path / "snapshots", keep=2)
    assert snapshots.enabled and not Snapshots(tmp_path, keep=1).enabled
    snapshots.add(1, _snapshot(1))
    assert snapshots.average() is None  # one epoch: nothing to average
    for step in (20, 3):  # ordered by step, not by when they were taken
        snapshots.add(step, _snapshot(step))
    snapshots.add(20, _snapshot(2))  # the same step again replaces it
    assert [p.name for p in snapshots.paths()] == ["step_00000003.pt", "step_00000020.pt"]
    state, n = snapshots.average()
    assert n == 2 and torch.equal(state["w"], torch.full((3,), 2.5))  # mean of 3 and 2


def test_a_damaged_snapshot_skips_averaging_with_a_warning(tmp_path, caplog):
    snapshots = Snapshots(tmp_path, keep=3)
    for epoch in (1, 2):
        snapshots.add(epoch, _snapshot(epoch))
    path = snapshots.paths()[0]
    path.write_bytes(path.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="tfm"):
        assert snapshots.average() is None
    assert "checkpoint averaging skipped" in caplog.text and path.name in caplog.text


def test_trying_weights_gives_the_model_its_own_weights_back_even_after_an_error():
    model = torch.nn.Linear(2, 2)
    own = {k: v.clone() for k, v in model.state_dict().items()}
    other = {k: torch.zeros_like(v) for k, v in own.items()}
    with pytest.raises(KeyboardInterrupt), trying_weights(model, other):
        assert all(torch.equal(v, other[k]) for k, v in model.state_dict().items())
        raise KeyboardInterrupt
    assert all(torch.equal(v, own[k]) for k, v in model.state_dict().items())


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_a_run_averages_its_last_epochs_and_keeps_the_average_only_if_it_is_better(tmp_path):
    cfg = small_config(tmp_path, epochs=3, average_last=2, threads=1)
    run_training(cfg)
    run = cfg.run_dir
    snapshots = Snapshots(run / "snapshots", keep=2)
    epoch_end_steps = [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]
    assert [p.name for p in snapshots.paths()] == [f"step_{s:08}.pt" for s in epoch_end_steps[-2:]]
    averaged, _ = snapshots.average()
    trained = read_payload(snapshots.paths()[-1])["state_dict"]
    assert _weights_equal(read_payload(run / "last.pt")["state_dict"], trained)  # not the average
    [line] = [
        x for x in (run / "train.log").read_text().splitlines() if "average of the last 2 snapshots: Val. Loss " in x
    ]
    average_loss = float(line.split("Val. Loss ")[1].split(" |")[0])
    best_single = float(line.split("(best single: ")[1].rstrip(")"))
    best = read_payload(run / "best.pt")
    assert _weights_equal(best["state_dict"], averaged) == (average_loss < best_single)
    assert ("averaged_snapshots" in best["metrics"]) == (average_loss < best_single)

    # The same averaging again, once against a best single epoch it cannot beat, once against
    # one it must: best.pt is left alone, then replaced by the average; last.pt keeps training.
    for best_single, replaced in ((0.0, False), (math.inf, True)):
        before = (run / "best.pt").read_bytes()
        trainer = make_trainer(cfg)
        trainer.restore(Checkpoint.read(run / "last.pt"))
        trainer.progress.pending_average, trainer.progress.best_valid_loss = True, best_single
        trainer.run()
        best = read_payload(run / "best.pt")
        assert ((run / "best.pt").read_bytes() != before) == replaced
        if replaced:
            assert _weights_equal(best["state_dict"], averaged)
            assert best["metrics"]["averaged_snapshots"] == 2
            assert math.isclose(best["metrics"]["valid_loss"], trainer.progress.best_valid_loss, abs_tol=1e-5)
        assert _weights_equal(read_payload(run / "last.pt")["state_dict"], trained)
        assert not trainer.progress.pending_average


@pytest.mark.slow
def test_snapshots_every_n_steps_add_to_the_epoch_ends_and_survive_a_resume(tmp_path):
    """snapshot_every_steps=5 over 3 epochs: snapshots at steps 5, 10, 15, ... and at each
    epoch's end; the last 4 are kept. A run stopped at step 17 and resumed keeps the same
    snapshots with the same weights as the uninterrupted run."""
    straight = small_config(tmp_path / "a", average_last=4, snapshot_every_steps=5, threads=1)
    run_training(straight)
    interrupted = small_config(tmp_path / "b", average_last=4, snapshot_every_steps=5, threads=1, max_steps=17)
    run_training(interrupted)
    interrupted.train.max_steps = None
    run_training(interrupted)
    ends = [r["step"] for r in map(json.loads, (straight.run_dir / "metrics.jsonl").read_text().splitlines())]
    expected = sorted({*range(5, ends[-1] + 1, 5), *ends})[-4:]
    kept = [Snapshots(c.run_dir / "snapshots", keep=4).paths() for c in (straight, interrupted)]
    assert [p.name for p in kept[0]] == [p.name for p in kept[1]] == [f"step_{s:08}.pt" for s in expected]
    for a, b in zip(*kept):
        assert _weights_equal(read_payload(a)["state_dict"], read_payload(b)["state_dict"])
