"""Continued training (train.init_from): the nightly run continues the published model on a
grown corpus with the parent's tokenizers, resumes exactly, and refuses a bad parent."""

from __future__ import annotations

import json
import logging
import pickle
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import run_tfm, sentence_pairs, untrained_checkpoint, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.data.manifest import DataManifest, summary_table
from transformer_cli.data.preprocess import prepare
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import vocabulary_digest
from transformer_cli.training.parent import parent_tokenizers
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.session import run_training

pytestmark = pytest.mark.slow

MODEL = {"d_model": 64, "n_heads": 4, "d_ff": 128}


def nightly_config(work: Path, corpus: Path, **train) -> Path:
    """The nightly config: continue the published model, 2 epochs when continuing, whatever
    the corpus's growth (train.retrain.policy fixed: the policy's own tests are in
    test_retrain_policy.py)."""
    return write_config(
        work / "nightly.yaml",
        work,
        corpus,
        model=MODEL,
        train={
            "epochs": 4,
            "lr": 3e-3,
            "threads": 1,
            "init_from": "published",
            "continued": {"epochs": 2, "lr": 1e-3},
            "retrain": {"policy": "fixed"},
            **train,
        },
    )


def grow(corpus: Path, extra: list[tuple[str, str]]) -> None:
    """Append pairs to the corpus's training files (yesterday's corpus grows into today's)."""
    for lang, side in (("de", 0), ("en", 1)):
        path = corpus / f"train.{lang}"
        path.write_text(path.read_text() + "".join(f"{p[side]}\n" for p in extra))


def last_decision(run: Path) -> dict:
    return json.loads((run / "promotions.log").read_text().splitlines()[-1])


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """A corpus of 300 pairs and the first night's run (nothing published yet), made once."""
    work = tmp_path_factory.mktemp("night")
    corpus = write_corpus(work / "corpus", {"train": 300, "val": 40, "test_2016_flickr": 20}, gz=False)
    r = run_tfm("train", "-c", str(nightly_config(work, corpus)), "--quiet")
    assert r.returncode == 0, r.stderr
    return work


@pytest.fixture
def night_one(first_night, tmp_path):
    """A copy of the first night's work folder (corpus, data, run) for one test to change."""
    work = tmp_path / "work"
    shutil.copytree(first_night, work)
    return {
        "cfg": nightly_config(work, work / "corpus"),
        "corpus": work / "corpus",
        "run": work / "checkpoints" / "nightly",
        "data": work / "data" / "nightly",
    }


def test_the_nightly_command_continues_the_published_model_when_the_corpus_grows(night_one):
    cfg, run, data = night_one["cfg"], night_one["run"], night_one["data"]
    log = (run / "train.log").read_text()
    assert "nothing is published in" in log and "yet: training from scratch" in log
    first = Checkpoint.read(run / "published.pt")
    assert first.parent is None and first.metrics["epoch"] == 4  # train.epochs, not continued
    vocabulary = (data / "spm.shared.model").read_bytes()

    # A night without new data: nothing to do (the published model is this run's own).
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "already finished" in (run / "train.log").read_text().splitlines()[-2]
    assert Checkpoint.read(run / "published.pt").sha256 == first.sha256

    # The corpus grows: the next night continues the published model with its tokenizers.
    grow(night_one["corpus"], sentence_pairs(200, seed=7))
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    log = (run / "train.log").read_text().split("tfm train -c")[-1]
    assert f"continuing {run / 'published.pt'} (sha256 {first.sha256[:12]}" in log
    assert "500 train pairs" in log
    assert (data / "spm.shared.model").read_bytes() == vocabulary  # nothing was fitted
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["tokenizer_from"]["sha256"] == first.sha256
    assert json.loads((run / "manifest.json").read_text())["parent"]["sha256"] == first.sha256
    metrics = RunDir(run).read_metrics()
    assert [r.epoch for r in metrics] == [1, 2]  # train.continued.epochs
    assert metrics[0].valid_loss < first.metrics["valid_loss"] + 0.5  # not from scratch
    decision = last_decision(run)
    assert decision["metric"] == "valid_loss"  # same vocabularies: compared by loss
    assert decision["published_sha256"] == first.sha256
    second = Checkpoint.read(run / "published.pt")
    assert decision["decision"].startswith("promoted") and second.sha256 != first.sha256
    assert second.parent["sha256"] == first.sha256 and second.parent["from"] == "published"

    # And the night after, without new data, is a no-op again.
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    assert Checkpoint.read(run / "published.pt").sha256 == second.sha256
    assert "already finished" in (run / "train.log").read_text().splitlines()[-2]

    # The continued model is a model like any other.
    r = run_tfm("translate", "-c", str(cfg), "Ein Mann sieht einen Ball.")
    assert r.returncode == 0 and r.stdout.strip(), r.stderr


def test_the_unk_rate_of_new_text_under_the_parents_tokenizers_is_reported(night_one, caplog):
    """300 pairs whose sources hold a Cyrillic word and an emoji, which the published model's
    SentencePiece vocabulary never saw: preprocessing with its tokenizers says how much of the
    training split became <unk>, per side, in its log, its summary and the data manifest."""
    caplog.set_level(logging.INFO, logger="tfm")
    cfg = load_config(str(night_one["cfg"]))
    own = DataManifest.load(night_one["data"]).splits["train"].unk_rate  # fitted on this text
    assert own is not None and own.src == own.tgt == 0
    grow(night_one["corpus"], [(f"{de[:-1]} кот 🐈.", en) for de, en in sentence_pairs(300, seed=5)])
    prepared, rebuilt = prepare(cfg, given=parent_tokenizers(cfg))
    assert rebuilt and prepared.manifest.tokenizer_from is not None
    rate = prepared.manifest.splits["train"].unk_rate
    assert rate is not None and 0.005 < rate.src < 0.2 and rate.tgt == 0, rate
    said = f"<unk> rate on train (the parent's tokenizers): de {100 * rate.src:.2f}%, en 0.00% of the tokens"
    assert said in [r.getMessage() for r in caplog.records]
    assert said in summary_table(prepared.manifest).splitlines()
    recorded = json.loads((night_one["data"] / "manifest.json").read_text())["splits"]["train"]["unk_rate"]
    assert recorded == {"src": rate.src, "tgt": 0.0}


def test_new_data_that_makes_the_model_worse_keeps_the_published_model(night_one):
    cfg, run = night_one["cfg"], night_one["run"]
    published = (run / "published.pt").read_bytes()
    pairs = sentence_pairs(1200, seed=9)  # misaligned: every source with another's target
    grow(night_one["corpus"], [(a[0], b[1]) for a, b in zip(pairs, pairs[1:])])
    r = run_tfm("train", "-c", str(cfg), "--quiet", "--set", "train.continued.lr=0.01")
    assert r.returncode == 0, r.stderr
    decision = last_decision(run)
    assert decision["metric"] == "valid_loss" and decision["candidate"] > decision["published"]
    # It learned from 1,199 more pairs (+400%), so it had only to be within
    # train.promote_tolerance_loss of the published model: it is not.
    figures = f"valid_loss {decision['candidate']:.4g} against the best published {decision['best_published']:.4g}"
    said = f"kept published (it forgets: {figures}, worse by more than 0.01, though it learned from 399.7% more pairs)"
    assert decision["decision"] == said
    assert (run / "published.pt").read_bytes() == published


def test_an_interrupted_continued_run_resumes_exactly(night_one, tmp_path):
    parent = night_one["run"] / "best.pt"

    def continued(name: str, **train):
        path = write_config(
            tmp_path / name / "c.yaml",
            tmp_path / name,
            night_one["corpus"],
            model=MODEL,
            train={"epochs": 3, "lr": 1e-3, "threads": 1, "init_from": str(parent), **train},
        )
        return load_config(str(path))

    straight = continued("straight")
    run_training(straight)
    interrupted = continued("interrupted", max_steps=13)  # stops mid-epoch 2
    run_training(interrupted)
    interrupted.train.max_steps = None  # the same command without the cap resumes
    run_training(interrupted)
    a, b = (RunDir(c.run_dir).read_metrics() for c in (straight, interrupted))
    key = [(r.step, r.train_loss, r.valid_loss) for r in a if r.end_of_epoch]
    assert len(key) == 3 and key == [(r.step, r.train_loss, r.valid_loss) for r in b if r.end_of_epoch]
    last = Checkpoint.read(interrupted.run_dir / "last.pt")
    assert last.parent["sha256"] == Checkpoint.read(parent).sha256  # kept across the resume
    assert not run_training(interrupted).trained  # finished, same parent and data: a no-op

    # Another parent file is another run: it starts over from that one.
    shutil.copy(night_one["run"] / "last.pt", parent)
    outcome = run_training(interrupted)
    assert outcome.trained and outcome.progress.step == RunDir(interrupted.run_dir).read_metrics()[-1].step
    assert Checkpoint.read(interrupted.run_dir / "last.pt").parent["sha256"] == Checkpoint.read(parent).sha256


def test_the_architecture_and_tokenizers_come_from_the_parent(night_one, tmp_path, caplog):
    other = write_corpus(tmp_path / "other", {"train": 200, "val": 20, "test_2016_flickr": 10})
    path = write_config(
        tmp_path / "x" / "x.yaml",
        tmp_path / "x",
        other,
        model={"d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.3},
        tokenizer={"vocab_size": 90},
        train={"epochs": 1, "threads": 1, "init_from": str(night_one["run"] / "best.pt")},
    )
    cfg = load_config(str(path))
    run_training(cfg)
    warning = next(r.getMessage() for r in caplog.records if "the model is the parent's" in r.getMessage())
    assert "model.d_model 32 -> 64" in warning and "model.n_heads 2 -> 4" in warning
    assert "model.d_ff 64 -> 128" in warning and "dropout" not in warning
    best = Checkpoint.read(cfg.run_dir / "best.pt")
    assert best.model_config["d_model"] == 64 and best.model_config["dropout"] == 0.3
    parent = Checkpoint.read(night_one["run"] / "best.pt")
    assert best.tokenizer["shared"]["model"] == parent.tokenizer["shared"]["model"]


def spacy_parent(path: Path) -> Path:
    """A real tfm checkpoint of an untrained model with spaCy word vocabularies (one per side)
    fitted on the synthetic corpus, recording the tokenizer settings it was made with."""

    from helpers import fit_tokenizers

    from transformer_cli.config import Config, TokenizerConfig
    from transformer_cli.model.transformer import Seq2SeqTransformer
    from transformer_cli.model.transformer_config import TransformerConfig

    pairs = sentence_pairs(300)
    cfg = Config(name=path.stem)
    cfg.tokenizer = TokenizerConfig(kind="spacy", min_freq=1)
    cfg.model = TransformerConfig(d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, max_len=64)
    pair = fit_tokenizers(cfg.tokenizer, "de", "en", [p[0] for p in pairs], [p[1] for p in pairs])
    net = Seq2SeqTransformer(cfg.model, pair.src.vocab_size, pair.tgt.vocab_size)
    Checkpoint(
        net.ARCHITECTURE, net.src_vocab_size, net.tgt_vocab_size, net.state_dict(), pair.state(), cfg.to_dict()
    ).write(path)
    return path


@pytest.mark.parametrize("parent_kind, config_kind", [("spacy", "sentencepiece"), ("sentencepiece", "spacy")])
def test_a_parent_of_another_tokenizer_kind_gives_its_tokenizers_and_the_run_records_them(
    tmp_path, corpus_dir, caplog, parent_kind, config_kind
):
    """The parent's tokenizers encode the corpus whatever tokenizer.kind the config says, and the
    run's config.yaml (and the data folder's) records the parent's tokenizer settings; the
    config's that differ are named in one warning. (A spaCy parent used to be recorded as
    sentencepiece; a SentencePiece parent under a spaCy config was refused for share_embeddings.)"""
    if parent_kind == "spacy":
        parent = spacy_parent(tmp_path / "parent.pt")
    else:  # one shared vocabulary and embedding matrix, which a spaCy config cannot have
        parent = untrained_checkpoint(tmp_path / "parent.pt", share_embeddings=True)
    tokenizer = {"kind": config_kind, "min_freq": 1, "vocab_size": 100, "joint": config_kind != "spacy"}
    path = write_config(
        tmp_path / "run" / "c.yaml",
        tmp_path / "run",
        corpus_dir,
        tokenizer=tokenizer,
        model={"share_embeddings": config_kind != "spacy"},
        train={"epochs": 1, "threads": 1, "init_from": str(parent)},
    )
    cfg = load_config(str(path))
    run_training(cfg)
    [warning] = [r.getMessage() for r in caplog.records if "the tokenizers are the parent's" in r.getMessage()]
    assert f"tokenizer.kind {config_kind!r} -> {parent_kind!r}" in warning and str(parent) in warning
    recorded = Checkpoint.read(parent).config["tokenizer"]
    for folder in (cfg.run_dir, cfg.data_dir):
        assert yaml.safe_load((folder / "config.yaml").read_text())["tokenizer"] == recorded
    assert json.loads((cfg.data_dir / "manifest.json").read_text())["tokenizer"] == parent_kind
    best = Checkpoint.read(cfg.run_dir / "best.pt")
    assert best.config["tokenizer"] == recorded
    assert vocabulary_digest(best.tokenizer) == vocabulary_digest(Checkpoint.read(parent).tokenizer)


def _unsafe(path: Path) -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("this ran",))

    path.write_bytes(pickle.dumps(Evil()))


def _damaged(path: Path, parent: Path) -> None:
    """A copy of `parent` cut short, as an interrupted copy leaves it."""
    data = parent.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 5])


@pytest.mark.parametrize("kind", ["missing", "damaged", "unsafe", "folder"])
def test_a_bad_parent_is_refused_in_one_line_before_anything_is_made(tmp_path, corpus_dir, kind):
    parent = tmp_path / "parent.pt"
    if kind == "damaged":
        _damaged(parent, untrained_checkpoint(tmp_path / "good.pt"))
    elif kind == "unsafe":
        _unsafe(parent)
    elif kind == "folder":
        parent.mkdir()
    work = tmp_path / "new"
    cfg = write_config(work / "c.yaml", work, corpus_dir, model=MODEL)
    r = run_tfm("train", "-c", str(cfg), "--init-from", str(parent), "--quiet")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfm: error: train.init_from: "), r.stderr
    assert str(parent) in lines[0] and "this ran" not in r.stdout + r.stderr
    assert not (work / "data").exists()
    assert sorted(p.name for p in (work / "checkpoints" / "c").iterdir()) == [".lock", "train.log"]


def test_a_damaged_published_model_is_restored_from_history_or_refused(night_one):
    run = night_one["run"]
    cfg = load_config(str(night_one["cfg"]))
    good = Checkpoint.read(run / "best.pt").sha256
    _damaged(run / "published.pt", run / "best.pt")
    with pytest.raises(UsageError, match="holds no earlier model to restore"):
        run_training(cfg)
    assert (run / "published.pt").is_file()  # nothing moved: a person decides
    (run / "published.history").mkdir()
    shutil.copy(run / "best.pt", run / "published.history" / "20250101T000000Z-old.pt")
    grow(night_one["corpus"], sentence_pairs(50, seed=3))
    run_training(cfg)
    assert (run / "published.pt.damaged").is_file()
    assert Checkpoint.read(run / "last.pt").parent["sha256"] == good  # continued the restored one
