"""training/build.py: a Trainer's parts from the config: the model by its architecture, seeded
by train.seed (the same seed, the same initial weights), the optimizer the config names,
torch's threads (train.threads: a number fixes them; auto tunes them in one CPU process), and
one vocabulary where the embeddings are shared."""

from __future__ import annotations

import os

import pytest
import torch
from training.test_loop import tiny_trainer
from training.test_train import make_trainer, small_config

from transformer_cli.errors import UsageError
from transformer_cli.host.machine import available_cpus
from transformer_cli.host.threads import FixedThreads, ThreadTuner
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.training.build import training_module, training_threads
from transformer_cli.training.distributed import DistContext


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from helpers import write_corpus

    return write_corpus(tmp_path_factory.mktemp("build-corpus"), {"train": 48, "val": 8, "test_2016_flickr": 4})


@pytest.fixture
def restored_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_the_parts_come_from_the_config_and_the_seed_gives_the_weights(tmp_path, corpus, restored_threads):
    a = tiny_trainer(tmp_path / "a", corpus, optimizer="adamw", seed=7)
    b = tiny_trainer(tmp_path / "b", corpus, optimizer="adamw", seed=7)
    c = tiny_trainer(tmp_path / "c", corpus, optimizer="adamw", seed=8)
    assert isinstance(a.model, Seq2SeqTransformer) and a.model.src_vocab_size == a.prepared.tokenizers.src.vocab_size
    assert type(a.optimization.optimizer).__name__ == "AdamW"
    assert isinstance(a.threads, FixedThreads) and torch.get_num_threads() == 1
    weights = [t.model.state_dict()["encoder.layers.0.feed_forward.w_1.weight"] for t in (a, b, c)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])
    assert a.identity == b.identity and a.data.steps(0) == 3


def test_shared_embeddings_need_one_vocabulary(tmp_path, corpus, restored_threads):
    from helpers import write_config

    from transformer_cli.config_loading import load_config
    from transformer_cli.data.preprocess import prepare
    from transformer_cli.training.build import build_trainer
    from transformer_cli.training.run_dir import RunDir
    from transformer_cli.training.signals import GracefulStop

    path = write_config(
        tmp_path / "split.yaml",
        tmp_path,
        corpus,
        tokenizer={"joint": False, "vocab_size": 60},
        data={"min_train_pairs": 8},
        train={"threads": 1, "data_workers": 0},
    )
    cfg = load_config(str(path), ["model.share_embeddings=false", "model.tie_output=false"])
    prepared, _ = prepare(cfg)
    cfg.model.share_embeddings = True  # as a config of the joint run would, on these files
    with pytest.raises(UsageError, match="model.share_embeddings needs one vocabulary for both sides; the "):
        build_trainer(cfg, prepared, RunDir(cfg.run_dir), torch.device("cpu"), DistContext(), GracefulStop(), False)


def test_threads_are_fixed_or_tuned_as_the_process_runs(monkeypatch, restored_threads):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    fixed = training_threads(2, cpu, DistContext())
    assert isinstance(fixed, FixedThreads) and torch.get_num_threads() == 2
    cpus = available_cpus()
    on_gpu = training_threads("auto", cuda, DistContext())
    assert isinstance(on_gpu, FixedThreads) and torch.get_num_threads() == cpus
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    training_threads(None, cpu, DistContext(rank=1, world_size=4))
    assert torch.get_num_threads() == max(1, cpus // 2)  # two ranks on this machine share its CPUs
    alone = training_threads("auto", cpu, DistContext())
    assert isinstance(alone, ThreadTuner if cpus > 1 else FixedThreads)
    model = torch.nn.Linear(2, 2)
    assert training_module(model, DistContext(), cpu, compile=False) is model


def test_threads_default_to_auto_starting_with_the_cpus_left_free(tmp_path):
    cfg = small_config(tmp_path, epochs=1)
    assert cfg.train.threads == "auto"
    previous = torch.get_num_threads()
    try:
        trainer = make_trainer(cfg)
        assert isinstance(trainer.threads, ThreadTuner if available_cpus() > 1 else FixedThreads)
        assert 1 <= torch.get_num_threads() == trainer.threads.count <= len(os.sched_getaffinity(0))
        if isinstance(trainer.threads, ThreadTuner):  # at what a moment's watch of the CPUs saw free
            assert trainer.threads.free is not None and "free), re-chosen" in trainer.threads.describe()
        cfg.train.threads = 1  # a number fixes them
        assert isinstance(make_trainer(cfg).threads, FixedThreads) and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)
