"""The promotion gate: best.pt replaces published.pt only when it is at least as good (or asked)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import typing

import numpy as np
import pytest
import torch
from helpers import sentence_pairs
from reliability.cron_helpers import run_dir, write_cron_config

from transformer_cli.checkpoint import Checkpoint, read_payload
from transformer_cli.config_loading import load_config
from transformer_cli.config_train import TrainConfig
from transformer_cli.data.preprocess import prepare
from transformer_cli.training.held_out import HeldOut
from transformer_cli.training.promotion import Decision, GateRules, Metric, Outcome, Policy, Scorer, promote
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training


@pytest.fixture(scope="module")
def models(tmp_path_factory, cron_data):
    """A good run (4 epochs, published), and the best.pt of a middling (2 epochs) and a weak one
    (1 epoch) on the same data."""
    root = tmp_path_factory.mktemp("promotion")
    good_cfg = write_cron_config(root / "good", cron_data, epochs=4)
    mid_cfg = write_cron_config(root / "mid", cron_data, epochs=2)
    weak_cfg = write_cron_config(root / "weak", cron_data, epochs=1)
    for cfg in (good_cfg, mid_cfg, weak_cfg):
        run_training(load_config(str(cfg)))
    cfg = load_config(str(good_cfg))
    prepared, _ = prepare(cfg)
    # The scorer the session builds for the gate (session.py), here on the CPU in fp32.
    scorer = Scorer(prepared, cfg.data.src_lang, cfg.data.tgt_lang, torch.device("cpu"), "fp32")
    good, mid, weak = run_dir(good_cfg), run_dir(mid_cfg), run_dir(weak_cfg)
    loss = {n: scorer(Checkpoint.read(r / "best.pt"), Metric.VALID_LOSS) for n, r in zip(NAMES, (good, mid, weak))}
    assert loss["good"] < loss["mid"] < loss["weak"], loss
    best = {n: r / "best.pt" for n, r in zip(NAMES, (good, mid, weak))}
    return {"good_run": good, **best, "loss": loss, "scorer": scorer, "data": cron_data}


NAMES = ("good", "mid", "weak")


def _run_with(tmp_path, published, best) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.create()
    shutil.copyfile(published, run.published)
    shutil.copyfile(best, run.best)
    return run


def _decisions(run: RunDir) -> list[dict]:
    return [json.loads(x) for x in run.promotions.read_text().splitlines()]


def test_worse_best_is_kept_out_and_the_decision_is_not_repeated(tmp_path, models):
    run = _run_with(tmp_path, published=models["good"], best=models["weak"])
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, models["scorer"])
    assert decision == Decision(Outcome.KEPT, "kept published (it is better)")
    assert run.published.read_bytes() == models["good"].read_bytes()
    [entry] = _decisions(run)
    assert entry["decision"] == decision.text and entry["policy"] == "if-better"
    assert entry["metric"] == "valid_loss" and entry["candidate"] > entry["published"]
    assert entry["candidate_sha256"] == read_payload(models["weak"])["sha256"]
    assert entry["published_sha256"] == read_payload(models["good"])["sha256"]
    # The next nightly run with the same best.pt does not score or log it again.
    again = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, models["scorer"])
    assert again == Decision(Outcome.ALREADY_DECIDED, f"already decided for this best.pt: {decision}")
    assert len(_decisions(run)) == 1 and run.published.read_bytes() == models["good"].read_bytes()


def test_better_best_replaces_published(tmp_path, models):
    run = _run_with(tmp_path, published=models["weak"], best=models["good"])
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, models["scorer"])
    assert decision == Decision(Outcome.PROMOTED, "promoted (at least as good)")
    assert run.published.read_bytes() == models["good"].read_bytes()
    [entry] = _decisions(run)
    assert entry["decision"] == decision.text and entry["candidate"] < entry["published"]
    assert promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, models["scorer"]).outcome is Outcome.ALREADY_DECIDED
    unchanged = promote(run, Policy.ALWAYS, Metric.VALID_LOSS, models["scorer"])
    assert unchanged == Decision(Outcome.UNCHANGED, "unchanged (published is this best.pt)")
    assert len(_decisions(run)) == 2  # a new policy is a new decision


def test_promote_never_and_always_through_the_cli(tmp_path, models, tfm_fork):
    """A finished run whose best.pt is worse than published.pt: the nightly no-op run decides."""
    configs = {}
    for policy in ("never", "always"):
        cfg = write_cron_config(tmp_path / policy, models["data"], epochs=4)
        shutil.copytree(models["good_run"], run_dir(cfg))
        shutil.copyfile(models["weak"], run_dir(cfg) / "best.pt")
        configs[policy] = cfg
    never, always = tfm_fork.run_all(
        tmp_path, *(("train", "-c", str(configs[p]), "--promote", p) for p in ("never", "always"))
    )
    for r in (never, always):
        assert r.returncode == 0, r.stderr
        assert "already finished" in r.stderr
    assert "promotion: kept published (--promote never)" in never.stderr
    assert "promotion: promoted (--promote always)" in always.stderr
    good, weak = models["good"].read_bytes(), models["weak"].read_bytes()
    assert (run_dir(configs["never"]) / "published.pt").read_bytes() == good
    assert (run_dir(configs["always"]) / "published.pt").read_bytes() == weak
    for policy in ("never", "always"):
        entries = _decisions(RunDir(run_dir(configs[policy])))
        assert [e["decision"] for e in entries][0] == "promoted (none published yet)"
        assert entries[-1]["policy"] == policy and len(entries) == 2


def test_damaged_best_keeps_published_and_does_not_fail(tmp_path, models):
    run = _run_with(tmp_path, published=models["good"], best=models["weak"])
    data = bytearray(run.best.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\0" * 64
    run.best.write_bytes(bytes(data))
    assert promote(run, Policy.ALWAYS, Metric.VALID_LOSS, models["scorer"]) == Decision(
        Outcome.NOTHING, "nothing promoted: best.pt is damaged"
    )
    assert run.published.read_bytes() == models["good"].read_bytes()


def test_the_gates_policies_and_metrics_are_the_configs_choices():
    """The config file spells them; the gate branches on members, never on the strings."""
    hints = typing.get_type_hints(TrainConfig)
    assert [p.value for p in Policy] == list(typing.get_args(hints["promote"]))
    assert [m.value for m in Metric] == list(typing.get_args(hints["promote_metric"]))
    assert Metric.VALID_LOSS.lower_is_better and not Metric.VALID_BLEU.lower_is_better
    rules = GateRules(margin_loss=0.1, margin_bleu=1.0)
    assert rules.better(Metric.VALID_LOSS, 2.0, 2.1) and not rules.better(Metric.VALID_LOSS, 2.01, 2.1)
    assert rules.better(Metric.VALID_BLEU, 31.0, 30.0) and not rules.better(Metric.VALID_BLEU, 30.9, 30.0)
    # A continuation on a grown corpus: the tolerance instead of the margin.
    rules = GateRules(margin_loss=0.1, tolerance_loss=0.01, margin_bleu=1.0, tolerance_bleu=0.3)
    loss, bleu = Metric.VALID_LOSS, Metric.VALID_BLEU
    assert rules.better(loss, 2.105, 2.1, grown=True) and not rules.better(loss, 2.12, 2.1, grown=True)
    assert rules.better(bleu, 29.8, 30.0, grown=True) and not rules.better(bleu, 29.6, 30.0, grown=True)


def _continued_on_more_pairs(path, out, parent, growth: float) -> int:
    """`path`'s model, recorded as the continuation of `parent` on `growth` more pairs than the
    original run (a night's grown corpus); written to `out`."""
    checkpoint, published = Checkpoint.read(path), Checkpoint.read(parent)
    assert checkpoint.training is not None  # every run records its training pairs
    pairs = round(checkpoint.training["train_pairs"] * (1 + growth))
    training = {**checkpoint.training, "train_pairs": pairs}
    parent_record = {"from": "published", "path": str(parent), "sha256": published.sha256}
    dataclasses.replace(checkpoint, training=training, parent=parent_record).write(out)
    return pairs


def test_a_model_trained_on_a_grown_corpus_needs_only_to_be_within_the_tolerance(tmp_path, models):
    """The nightly continuation saw pairs the published model never did: a tie goes to it,
    a clearly worse one is still kept out. Growth is read from what the checkpoints record;
    a model that did not continue the published one must be better."""
    scorer, loss = models["scorer"], models["loss"]
    gap = loss["weak"] - loss["good"]
    old = Checkpoint.read(models["good"]).training["train_pairs"]
    for tolerance, outcome in ((gap + 0.01, Outcome.PROMOTED), (gap / 2, Outcome.KEPT)):
        run = _run_with(tmp_path / str(outcome.value), published=models["good"], best=models["weak"])
        new = _continued_on_more_pairs(models["weak"], run.best, run.published, 0.035)
        rules = GateRules(tolerance_loss=round(tolerance, 4))
        decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, rules)
        grew = f"it learned from {(new - old) / old:.1%} more pairs"
        [entry] = _decisions(run)
        figures = f"valid_loss {entry['candidate']:.4g} against the best published {entry['best_published']:.4g}"
        expected = (
            f"promoted ({grew}; within {rules.tolerance_loss} of the best published)"
            if outcome is Outcome.PROMOTED
            else f"kept published (it forgets: {figures}, worse by more than {rules.tolerance_loss}, though {grew})"
        )
        assert decision == Decision(outcome, expected)
        assert entry["rules"]["tolerance_loss"] == rules.tolerance_loss and entry["candidate"] > entry["published"]
        assert entry["best_published"] == entry["published"]
        assert (run.published.read_bytes() == run.best.read_bytes()) is (outcome is Outcome.PROMOTED)
    # A continuation that is better outright says so, as any better model does.
    run = _run_with(tmp_path / "better", published=models["weak"], best=models["good"])
    _continued_on_more_pairs(models["good"], run.best, run.published, 0.035)
    better = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, GateRules(tolerance_loss=0.01))
    assert better == Decision(Outcome.PROMOTED, "promoted (at least as good)")
    # Trained on the same pairs, or on more but not from the published model, the tolerance
    # does not apply: the weaker model must be better.
    for name, growth, parent in (("same", 0.0, models["good"]), ("scratch", 0.035, models["mid"])):
        run = _run_with(tmp_path / name, published=models["good"], best=models["weak"])
        _continued_on_more_pairs(models["weak"], run.best, parent, growth)
        decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, GateRules(tolerance_loss=gap + 0.01))
        assert decision == Decision(Outcome.KEPT, "kept published (it is better)"), name


def test_nightly_ties_cannot_walk_the_quality_down(tmp_path, models):
    """Two nights, each within the tolerance of the model it replaces, but the second beyond it
    from the best model published on this validation data: the second is kept out."""
    scorer, loss = models["scorer"], models["loss"]
    steps = (loss["mid"] - loss["good"], loss["weak"] - loss["mid"])
    rules = GateRules(tolerance_loss=max(steps) + min(steps) / 2)  # one step passes, two do not
    run = _run_with(tmp_path, published=models["good"], best=models["mid"])
    _continued_on_more_pairs(models["mid"], run.best, run.published, 0.035)
    first = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, rules)
    assert first.outcome is Outcome.PROMOTED, first
    mid_published = run.published.read_bytes()
    _continued_on_more_pairs(models["weak"], run.best, run.published, 0.07)
    second = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, rules)
    assert second.outcome is Outcome.KEPT and "it forgets" in second.text, second
    night_one, night_two = _decisions(run)
    assert night_two["best_published"] == night_one["published"] == round(loss["good"], 5)
    assert night_two["published"] == night_one["candidate"] and night_two["scored_on"] == night_one["scored_on"]
    assert run.published.read_bytes() == mid_published


def _held_out(models, n: int = 12) -> Scorer:
    """The gate's scorer with `n` held-out new pairs of the kind the models learned (the test
    corpus's sentences, another seed), as a replay night hands it over (training/held_out.py)."""
    pairs, scorer = sentence_pairs(n, seed=99), models["scorer"]
    held = HeldOut(np.arange(n, dtype=np.uint64), [p[0] for p in pairs], [p[1] for p in pairs], 10 * n, 0.1)
    return Scorer(scorer.prepared, scorer.src_lang, scorer.tgt_lang, torch.device("cpu"), "fp32", held_out=held)


HELD = re.compile(r"; held-out new pairs \(12\): loss (\d+\.\d{4}) against the published model's (\d+\.\d{4})$")


def _held_figures(decision: Decision, entry: dict) -> tuple[float, float]:
    """The held-out losses the decision names, checked against promotions.log's record."""
    match = HELD.search(decision.text)
    assert match, decision.text
    candidate, published = float(match[1]), float(match[2])
    assert entry["held_out"]["pairs"] == 12 and entry["held_out"]["tokens"] > 12
    assert (candidate, published) == (
        round(entry["held_out"]["candidate"], 4),
        round(entry["held_out"]["published"], 4),
    )
    return candidate, published


def test_a_night_is_judged_on_its_held_out_new_pairs_too_and_its_line_names_both_losses(tmp_path, models):
    """A candidate that continued the published model is scored with it on its night's held-out
    new pairs: the decision line names both losses; a candidate worse on them than the published
    model by more than the tolerance is kept out, whatever validation says; a candidate that did
    not continue the published model is not scored on them."""
    scorer, gap = _held_out(models), models["loss"]["weak"] - models["loss"]["good"]
    run = _run_with(tmp_path / "learned", published=models["weak"], best=models["good"])
    _continued_on_more_pairs(models["good"], run.best, run.published, 0.035)
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, GateRules(tolerance_held_out=0.05))
    assert decision.outcome is Outcome.PROMOTED and decision.text.startswith("promoted (at least as good); held-out")
    [entry] = _decisions(run)
    candidate, published = _held_figures(decision, entry)
    assert candidate < published and entry["rules"]["tolerance_held_out"] == 0.05 and "\n" not in decision.text

    # Within the validation tolerance, but worse on the new pairs it was to learn: kept out.
    for tolerance, outcome in ((0.0, Outcome.KEPT), (100.0, Outcome.PROMOTED)):
        run = _run_with(tmp_path / f"unlearned-{outcome.value}", published=models["good"], best=models["weak"])
        _continued_on_more_pairs(models["weak"], run.best, run.published, 0.035)
        rules = GateRules(tolerance_loss=round(gap + 0.01, 4), tolerance_held_out=tolerance)
        decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, rules)
        [entry] = _decisions(run)
        held = entry["held_out"]
        assert decision.outcome is outcome and held["candidate"] > held["published"]
        if outcome is Outcome.KEPT:
            assert decision.text == (
                f"kept published (it did not learn the new pairs: on the 12 held out, its loss "
                f"{held['candidate']:.4f} is above the published model's {held['published']:.4f} by more than 0.0)"
            )
            assert run.published.read_bytes() == models["good"].read_bytes()
        else:
            assert "within" in decision.text and _held_figures(decision, entry)[0] > _held_figures(decision, entry)[1]

    # Not a continuation of the published model: the held-out pairs are not its night's.
    run = _run_with(tmp_path / "other", published=models["weak"], best=models["good"])
    _continued_on_more_pairs(models["good"], run.best, models["mid"], 0.035)
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, scorer, GateRules(tolerance_held_out=0.0))
    assert decision == Decision(Outcome.PROMOTED, "promoted (at least as good)")
    assert "held_out" not in _decisions(run)[0]


def test_a_night_that_forgets_is_refused_in_one_line_naming_the_figures(tmp_path, models):
    """The published model's weights with noise on them, recorded as its continuation on 3.5%
    more pairs (a night that forgot what it knew): validation past the tolerance refuses it, in
    one line that names its validation loss, the best published one's and both held-out losses."""
    run = _run_with(tmp_path, published=models["good"], best=models["good"])
    checkpoint, noise = Checkpoint.read(models["good"]), torch.Generator().manual_seed(0)
    weights = {
        name: w + w.std() * torch.randn(w.shape, generator=noise) if w.is_floating_point() and w.numel() > 1 else w
        for name, w in checkpoint.weights.items()
    }
    dataclasses.replace(checkpoint, weights=weights).write(run.best)
    new, old = _continued_on_more_pairs(run.best, run.best, run.published, 0.035), checkpoint.training["train_pairs"]
    decision = promote(run, Policy.IF_BETTER, Metric.VALID_LOSS, _held_out(models), GateRules(tolerance_loss=0.01))
    [entry] = _decisions(run)
    assert decision.outcome is Outcome.KEPT and entry["candidate"] > entry["best_published"] + 0.01
    figures = f"valid_loss {entry['candidate']:.4g} against the best published {entry['best_published']:.4g}"
    grew = f"it learned from {(new - old) / old:.1%} more pairs"
    said = f"kept published (it forgets: {figures}, worse by more than 0.01, though {grew}); held-out new pairs (12): "
    assert decision.text.startswith(said)
    candidate, published = _held_figures(decision, entry)
    assert candidate > published and "\n" not in decision.text
    assert run.published.read_bytes() == models["good"].read_bytes()
