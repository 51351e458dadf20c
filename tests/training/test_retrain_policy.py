"""train.retrain, the continued-training policy of the nightly run: its decision on synthetic
figures (growth, continued runs, <unk> rate), policy fixed as before, and a night whose corpus
grew by two thirds retraining from scratch, logged, recorded and kept across a resume, and a
night of a new topic growing the vocabulary (train.retrain.grow_vocabulary)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import poodle_pairs, sentence_pairs
from training.test_continued import first_night, grow, last_decision, night_one  # noqa: F401 (fixtures)

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import Config
from transformer_cli.config_loading import load_config
from transformer_cli.config_retrain import RetrainConfig
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.training.retrain_policy import Decision, Facts, decide, defer, training_record
from transformer_cli.training.run_dir import RunDir, run_identity
from transformer_cli.training.session import run_training

RULES = RetrainConfig()  # the defaults: 15% growth, 14 continued runs, 1% <unk>, 4 to 8 epochs


# (pairs the parent was trained on, pairs now, <unk> rate, the parent's continued runs, rules)
#   -> (scratch, epochs, part of the reason)
@pytest.mark.parametrize(
    "parent_pairs, pairs, unk, runs, rules, expected",
    [
        # the measured points: +7.4% and +10% continued (4 epochs) as well as scratch; +20% (even
        # with 8 epochs) and +45% did not
        (27_000, 29_000, 0.002, 0, RULES, (False, 4, "4 epochs per +10% growth, 4 to 8")),
        (26_364, 29_000, 0.0, 0, RULES, (False, 4, "4 epochs per +10% growth, 4 to 8")),
        (24_167, 29_000, 0.0, 0, RULES, (True, 15, "growth 20% > 15%")),
        (20_000, 29_000, 0.002, 0, RULES, (True, 15, "growth 45% > 15%")),
        # between +10% and +15%: more epochs with the growth; scratch only past 15%
        (10_000, 11_200, 0.0, 3, RULES, (False, 5, "")),  # ceil(4 x 0.12 / 0.10) = 5
        (10_000, 11_500, 0.0, 3, RULES, (False, 6, "")),  # exactly 15%: not more than
        (10_000, 11_501, 0.0, 3, RULES, (True, 15, "growth 15% > 15%")),
        # a larger max_growth reaches max_epochs
        (10_000, 12_000, 0.0, 3, RetrainConfig(max_growth=0.5), (False, 8, "")),
        (10_000, 13_000, 0.0, 3, RetrainConfig(max_growth=0.5), (False, 8, "")),  # 12 -> max_epochs
        # below the measured point: never fewer than train.continued.epochs, unless min_epochs
        (10_000, 10_100, 0.0, 0, RULES, (False, 4, "")),
        (10_000, 10_100, 0.0, 0, RetrainConfig(min_epochs=1), (False, 1, "1 to 8")),
        (10_000, 9_000, 0.0, 0, RULES, (False, 4, "")),  # shrank: continued as for no growth
        # continued runs since the last from scratch
        (10_000, 10_100, 0.0, 13, RULES, (False, 4, "")),
        (10_000, 10_100, 0.0, 14, RULES, (True, 15, "14 continued runs since the last from scratch, at most 14")),
        # the parent's tokenizers on the new text
        (10_000, 10_100, 0.01, 0, RULES, (False, 4, "")),
        (10_000, 10_100, 0.0125, 0, RULES, (True, 15, "<unk> 1.2% > 1%")),
        # unknown figures force nothing: the default epochs
        (None, 29_000, None, None, RULES, (False, 4, "train.continued")),
        (None, 29_000, 0.05, None, RULES, (True, 15, "<unk> 5% > 1%")),
        # every rule that fires is named; null turns a rule off
        (10_000, 20_000, 0.02, 20, RULES, (True, 15, "growth 100% > 15%; 20 continued runs")),
        (
            10_000,
            20_000,
            0.02,
            20,
            RetrainConfig(max_growth=None, max_continued_runs=None, max_unk_rate=None),
            (False, 8, ""),
        ),
    ],
)
def test_the_decision_on_growth_continued_runs_and_unk_rate(parent_pairs, pairs, unk, runs, rules, expected):
    decision = decide(rules, Facts(pairs, parent_pairs, unk, runs), base_epochs=4, scratch_epochs=15)
    scratch, epochs, reason = expected
    assert (decision.scratch, decision.epochs) == (scratch, epochs), decision.text
    assert reason in decision.why
    assert Decision.from_record(json.loads(json.dumps(decision.record()))) == decision


def test_each_decision_is_one_line_with_its_figures():
    measured = decide(RULES, Facts(29_000, 27_000, 0.002, 0), 4, 15)
    assert measured.text == (
        "continued training: corpus grew 7.4% (27,000 -> 29,000 pairs), <unk> 0.2%, "
        "0 continued runs since the last from scratch: continuing 4 epochs (4 epochs per +10% growth, 4 to 8)"
    )
    grown = decide(RULES, Facts(29_000, 20_000, 0.002, 1), 4, 15)
    assert grown.text == (
        "continued training: corpus grew 45% (20,000 -> 29,000 pairs), <unk> 0.2%, "
        "1 continued run since the last from scratch: retraining from scratch (growth 45% > 15%; 15 epochs)"
    )
    unknown = decide(RULES, Facts(29_000), 4, 15)
    assert unknown.text == (
        "continued training: 29,000 pairs (the published model does not record how many it was trained on: "
        "scratch not forced by growth): continuing 4 epochs (train.continued)"
    )
    record = grown.record()
    assert record["decision"] == "scratch" and record["growth"] == 0.45 and record["text"] == grown.text


def test_a_replay_night_is_passes_over_the_new_pairs_when_the_parent_keeps_a_seen_set():
    rules = RetrainConfig(night="replay", replay_epochs=3, replay_ratio=0.5)
    seen = decide(rules, Facts(10_100, 10_000, 0.0, 2, parent_seen=True), 4, 15)
    assert (seen.scratch, seen.replay, seen.epochs) == (False, True, 3)
    assert (
        seen.outcome
        == "continuing 3 passes over the new pairs (night: replay, 0.5 held pair(s) drawn for each new one in a pass)"
    )
    assert Decision.from_record(json.loads(json.dumps(seen.record()))) == seen
    unseen = decide(rules, Facts(10_100, 10_000, 0.0, 2), 4, 15)  # no set to tell new from held
    assert not unseen.replay and unseen.epochs == 4 and unseen.why.endswith("no seen set to replay against")
    grown = decide(rules, Facts(13_000, 10_000, 0.0, 2, parent_seen=True), 4, 15)
    assert grown.scratch and not grown.replay  # past max_growth: from scratch, every pair


def test_a_scratch_decision_behind_the_nights_continues_the_night_and_says_why_and_where():
    """train.retrain.scratch: background: the night of a decision for scratch continues as if no
    rule had chosen it, and its line and record say the retrain is due, why, and where it stands."""
    scratch = decide(RULES, Facts(29_000, 24_167, 0.0, 3), 4, 15)
    night = defer(RULES, scratch, 4, "it trains in checkpoints/x.scratch after this night")
    assert not night.scratch and night.epochs == 8 and night.scratch_due == "growth 20% > 15%"
    assert night.text == (
        "continued training: corpus grew 20% (24,167 -> 29,000 pairs), <unk> 0%, 3 continued runs since the "
        "last from scratch: continuing 8 epochs (4 epochs per +10% growth, 4 to 8); a retrain from scratch is "
        "due (growth 20% > 15%): it trains in checkpoints/x.scratch after this night"
    )
    assert Decision.from_record(night.record()) == night
    assert "scratch_due" not in decide(RULES, Facts(29_000, 27_000), 4, 15).record()  # nothing due: as before
    replay = defer(RetrainConfig(night="replay"), decide(RULES, Facts(100, 50, None, 20, True), 4, 15), 4, "s")
    assert replay.replay and replay.epochs == 4 and "20 continued runs" in str(replay.scratch_due)


def test_checkpoints_count_continued_runs_since_a_run_from_scratch():
    def parent(training):
        return Checkpoint("transformer", 10, 10, {}, {}, {}, training=training)

    assert training_record(300, None, None) == {"train_pairs": 300, "continued_runs": 0}
    assert training_record(500, parent({"train_pairs": 300, "continued_runs": 3}), None)["continued_runs"] == 4
    assert training_record(500, parent(None), None)["continued_runs"] == 1  # counted from now on
    decision = decide(RULES, Facts(500, 300), 4, 15)
    assert training_record(500, None, decision)["retrain"]["decision"] == "scratch"


def test_the_policy_is_no_part_of_a_runs_identity_and_its_bounds_are_checked():
    cfg = Config()
    before = run_identity(cfg, "data")
    cfg.train.retrain = RetrainConfig(policy="fixed", max_growth=0.5, max_epochs=20)
    assert run_identity(cfg, "data") == before  # a resumed run keeps going under other thresholds
    assert load_config("base.yaml", ["train.retrain.max_growth=0.4"]).train.retrain.max_growth == 0.4
    with pytest.raises(UsageError, match="train.retrain.min_epochs=9 must be <= train.retrain.max_epochs=8"):
        load_config("base.yaml", ["train.retrain.min_epochs=9"])
    with pytest.raises(UsageError, match="train.retrain.policy must be one of 'adaptive', 'fixed'"):
        load_config("base.yaml", ["train.retrain.policy=sometimes"])


def _lines(run: Path, text: str) -> list[str]:
    return [line for line in (run / "train.log").read_text().splitlines() if text in line]


@pytest.mark.slow
def test_a_large_growth_retrains_from_scratch_and_a_resumed_run_keeps_that_decision(night_one):  # noqa: F811
    """300 -> 500 pairs (+67%, past max_growth): the night retrains from scratch with tokenizers
    fitted on the grown corpus, says so in one line and in promotions.log; stopped half-way and
    resumed under thresholds that would now continue, it goes on from scratch."""
    cfg_path, run, data = str(night_one["cfg"]), night_one["run"], night_one["data"]
    first = Checkpoint.read(run / "published.pt")
    assert first.training == {"train_pairs": 300, "continued_runs": 0}  # recorded by the first night
    grow(night_one["corpus"], sentence_pairs(200, seed=7))
    adaptive = ["train.retrain.policy=adaptive", "train.retrain.scratch=foreground"]  # the night itself
    run_training(load_config(cfg_path, [*adaptive, "train.max_steps=20"]))  # stops in epoch 2

    [line] = _lines(run, "continued training:")
    assert "corpus grew 66.7% (300 -> 500 pairs), <unk> 0%, 0 continued runs since the last from scratch" in line
    assert line.endswith("retraining from scratch (growth 66.7% > 15%; 4 epochs)")
    assert json.loads((run / "retrain.json").read_text())["decision"]["decision"] == "scratch"
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest.get("tokenizer_from") is None  # fitted on the grown corpus
    vocabulary = (data / "spm.shared.model").read_bytes()
    decision = last_decision(run)
    assert decision["retrain"]["decision"] == "scratch" and decision["retrain"]["growth"] == 0.6667
    assert decision["retrain"]["text"] == line.split(" INFO ", 1)[1]
    assert decision["metric"] == "valid_bleu"  # other tokenizers than the published model's

    # The same night's command again, with a threshold that would now continue: it resumes.
    resumed = load_config(cfg_path, [*adaptive, "train.retrain.max_growth=10"])
    assert run_training(resumed).trained
    assert len(_lines(run, "continued training: corpus grew")) == 1  # not decided again
    assert _lines(run, "as this run decided when it started: retraining from scratch (growth 66.7% > 15%")
    assert [line for line in _lines(run, "resuming at epoch") if "step 20 " in line]
    assert (data / "spm.shared.model").read_bytes() == vocabulary  # not encoded again
    assert [r.epoch for r in RunDir(run).read_metrics() if r.end_of_epoch] == [1, 2, 3, 4]  # train.epochs
    best = Checkpoint.read(run / "best.pt")
    assert best.parent is None and best.training is not None
    assert best.training["train_pairs"] == 500 and best.training["continued_runs"] == 0
    assert best.training["retrain"]["decision"] == "scratch"
    assert json.loads((run / "manifest.json").read_text())["training"]["retrain"]["decision"] == "scratch"
    assert not run_training(resumed).trained  # finished: the next night is a no-op


@pytest.mark.slow
def test_fixed_decides_nothing_and_a_small_growth_continues_for_more_epochs(night_one):  # noqa: F811
    cfg_path, run = str(night_one["cfg"]), night_one["run"]
    grow(night_one["corpus"], sentence_pairs(30, seed=7))  # +10%
    fixed = load_config(cfg_path)
    assert fixed.train.retrain.policy == "fixed"
    run_training(fixed)  # train.continued, as before the policy: 2 epochs, nothing decided
    assert not _lines(run, "continued training:") and not (run / "retrain.json").exists()
    assert [r.epoch for r in RunDir(run).read_metrics() if r.end_of_epoch] == [1, 2]
    assert "retrain" not in last_decision(run)
    assert Checkpoint.read(run / "last.pt").training == {"train_pairs": 330, "continued_runs": 1}

    # The policy turned on: the finished run is not decided again (a no-op, as before) ...
    adaptive = ["train.retrain.policy=adaptive", "train.retrain.max_growth=0.25"]  # +21% continues too
    assert not run_training(load_config(cfg_path, adaptive)).trained
    assert not _lines(run, "continued training:")

    # ... and the next growth continues the published model for epochs scaled with the growth.
    parent = Checkpoint.read(run / "published.pt")
    before = parent.training["train_pairs"]  # 330 if the gate promoted the continued model, else 300
    grow(night_one["corpus"], sentence_pairs(33, seed=8))
    growth = (363 - before) / before
    epochs = min(8, max(2, math.ceil(round(2 * growth / 0.10, 6))))  # 2 (+10%) or 5 (+21%)
    run_training(load_config(cfg_path, [*adaptive, "train.max_steps=5"]))
    [line] = _lines(run, "continued training:")
    assert f"({before} -> 363 pairs)" in line and line.endswith(
        f"continuing {epochs} epochs (2 epochs per +10% growth, 2 to 8)"
    )
    assert Checkpoint.read(run / "last.pt").parent["sha256"] == parent.sha256
    assert last_decision(run)["retrain"]["epochs"] == epochs


@pytest.mark.slow
def test_under_two_processes_rank_zero_decides_and_the_other_follows(night_one):  # noqa: F811
    """`tfm train --nproc-per-node 2` on a night of +67% growth: rank 0 decides (one line) and
    stores the decision; rank 1 reads it, so both train the same run from scratch."""
    import subprocess
    import sys

    cfg_path, run = str(night_one["cfg"]), night_one["run"]
    grow(night_one["corpus"], sentence_pairs(200, seed=7))
    two = subprocess.run(
        [sys.executable, "-m", "transformer_cli", "train", "-c", cfg_path, "--nproc-per-node", "2"]
        + ["--set", "train.retrain.policy=adaptive", "--set", "train.retrain.scratch=foreground"]
        + ["--set", "train.max_steps=8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    [line] = _lines(run, "continued training:")
    assert line.endswith("retraining from scratch (growth 66.7% > 15%; 4 epochs)")
    last = Checkpoint.read(run / "last.pt")
    assert last.parent is None and last.training is not None and last.training["retrain"]["decision"] == "scratch"
    assert json.loads((run / "manifest.json").read_text())["world_size"] == 2


@pytest.mark.slow
def test_a_continued_night_grows_the_vocabulary_by_a_new_topics_pieces_and_its_resume_keeps_them(night_one):  # noqa: F811
    """+20% pairs of a topic the corpus lacks (a poodle): the continued night adds the pieces a
    tokenizer fitted on its text has, in one line; the data is encoded with the grown
    tokenizers, the model gains their rows, the gate compares validation NLL in the published
    model's tokens; stopped and resumed,
    the night keeps them without deciding or encoding again."""
    cfg_path, run, data = str(night_one["cfg"]), night_one["run"], night_one["data"]
    parent = Checkpoint.read(run / "published.pt")
    old = TokenizerPair.from_state(parent.tokenizer)
    grow(night_one["corpus"], poodle_pairs(60, seed=7))
    night = ["train.retrain.policy=adaptive", "train.retrain.max_growth=null", "train.retrain.grow_vocabulary=true"]
    run_training(load_config(cfg_path, [*night, "train.max_steps=5"]))  # stops in the first epoch

    [line] = _lines(run, "vocabulary: fitted on the night's")
    stored = json.loads((run / "vocabulary.json").read_text())
    added = [piece for piece, _ in stored["added"]["shared"]]
    assert stored["parent_sha256"] == parent.sha256 and added
    n = old.src.vocab_size
    assert f"fitted on the night's 360 training pairs: shared {n} -> {n + len(added)} pieces" in line
    pair = TokenizerPair.load(data)
    assert pair.src.vocab_size == n + len(added) and pair.src.id_to_token(range(n)) == old.src.id_to_token(range(n))
    assert json.loads((data / "manifest.json").read_text())["tokenizer_from"]["grown_to"] == [n + len(added)] * 2
    assert Checkpoint.read(run / "last.pt").weights["encoder.embed.embedding.weight"].shape[0] == n + len(added)
    # the gate: the night's summed validation NLL per token of the published tokenization
    decision = last_decision(run)
    assert decision["metric"] == "valid_loss" and _lines(run, "comparing valid_loss per published token")
    encoded = (data / "spm.shared.model").read_bytes()

    assert run_training(load_config(cfg_path, night)).trained  # the same night again: it resumes
    assert len(_lines(run, "vocabulary: fitted on the night's")) == 1  # not decided again
    assert len(_lines(run, "continued training: corpus")) == 1
    assert [line for line in _lines(run, "resuming at epoch") if "step 5 " in line]
    assert (data / "spm.shared.model").read_bytes() == encoded  # not encoded again
    best = TokenizerPair.from_state(Checkpoint.read(run / "best.pt").tokenizer)
    topic = [de for de, _ in poodle_pairs(20, seed=8)]
    assert sum(map(len, best.src.encode_batch(topic))) < sum(map(len, old.src.encode_batch(topic)))
