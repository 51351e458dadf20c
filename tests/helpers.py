"""Helpers for tests: a small synthetic de->en corpus, configs that point at it, running tfm."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gzip
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import pytest
    from zygote import Zygote

    from transformer_cli.data.shards import EncodedChunk
    from transformer_cli.tokenizers.pair import TokenizerPair
    from transformer_cli.tokenizers.subword import SubwordTokenizer

ROOT = Path(__file__).resolve().parent.parent

# Word-for-word translatable pieces: a model can learn this corpus in seconds.
SUBJECTS = [
    ("ein mann", "a man"),
    ("eine frau", "a woman"),
    ("ein kind", "a child"),
    ("zwei hunde", "two dogs"),
    ("ein junge", "a boy"),
    ("ein mädchen", "a girl"),
]
VERBS = [("sieht", "sees"), ("hält", "holds"), ("trägt", "carries"), ("malt", "paints")]
OBJECTS = [
    ("einen ball", "a ball"),
    ("ein buch", "a book"),
    ("einen hut", "a hat"),
    ("eine blume", "a flower"),
    ("ein fahrrad", "a bicycle"),
]
PLACES = [("", ""), (" im park", " in the park"), (" am strand", " on the beach"), (" in der stadt", " in the city")]


def sentence_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        (sd, se), (vd, ve), (od, oe), (pd, pe) = (
            rng.choice(SUBJECTS),
            rng.choice(VERBS),
            rng.choice(OBJECTS),
            rng.choice(PLACES),
        )
        de, en = f"{sd} {vd} {od}{pd}.", f"{se} {ve} {oe}{pe}."
        pairs.append((de[0].upper() + de[1:], en[0].upper() + en[1:]))
    return pairs


def poodle_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs of a topic `sentence_pairs` lacks, in letters it has: a poodle does things."""
    pairs = sentence_pairs(n, seed)
    return [(f"Ein pudel {de.split(' ', 2)[2]}", f"A poodle {en.split(' ', 2)[2]}") for de, en in pairs]


def grown_tokenizers(model_type: Any) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """A joint SentencePiece tokenizer fitted without the poodle topic (a parent's), and its
    growth (tokenizers/growth.py) by a tokenizer fitted with it."""
    from transformer_cli.config import TokenizerConfig
    from transformer_cli.tokenizers.growth import GrowthRule, appended, new_pieces, scored
    from transformer_cli.tokenizers.subword import SubwordTokenizer

    old_lines = [side for pair in sentence_pairs(300, seed=1) for side in pair]
    new_lines = old_lines + [side for pair in poodle_pairs(80, seed=2) for side in pair]
    size = 120 if model_type == "bpe" else 70
    settings = TokenizerConfig(kind="sentencepiece", model_type=model_type, vocab_size=size)
    parent, fitted = SubwordTokenizer.train(old_lines, settings, 1), SubwordTokenizer.train(new_lines, settings, 1)
    growth = new_pieces(parent, fitted, new_lines, GrowthRule(2, 40))
    return parent, appended(parent, scored(parent, fitted, growth.added))


def write_corpus(folder: Path, sizes: dict[str, int] | None = None, gz: bool = True) -> Path:
    """Files `<split>.{de,en}[.gz]` for splits train/val/test_2016_flickr."""
    sizes = sizes or {"train": 300, "val": 40, "test_2016_flickr": 40}
    folder.mkdir(parents=True, exist_ok=True)
    for i, (split, n) in enumerate(sizes.items()):
        pairs = sentence_pairs(n, seed=i)
        for lang, lines in (("de", [p[0] for p in pairs]), ("en", [p[1] for p in pairs])):
            data = "".join(f"{x}\n" for x in lines).encode()
            if gz:
                (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(data, mtime=0))
            else:
                (folder / f"{split}.{lang}").write_bytes(data)
    return folder


def modules_after_loading(overrides: list[str], *modules: str, config: str = "tiny.yaml") -> list[bool]:
    """Whether each of `modules` is imported once a fresh Python has loaded `config` with
    `overrides` (a config's settings are read without torch, ctranslate2, ...)."""
    code = (
        "import sys; from transformer_cli.config_loading import load_config; "
        f"load_config({config!r}, {overrides!r}); print([m in sys.modules for m in {list(modules)!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return [word == "True" for word in out.strip().strip("[]").split(", ")]


def write_config(path: Path, work: Path, source: Path | str, **sections: dict) -> Path:
    """A tiny config reading the synthetic corpus; `sections` update it, e.g. model={...}."""
    cfg: dict[str, Any] = {
        "name": path.stem,
        "data": {
            "corpus": "files",
            "source": str(source),
            "dir": str(work / "data"),
            "cache_dir": str(work / "cache"),
            "train_max_len": 40,
        },
        "tokenizer": {"kind": "sentencepiece", "vocab_size": 120, "joint": True},
        "model": {
            "d_model": 32,
            "n_heads": 4,
            "n_encoder_layers": 1,
            "n_decoder_layers": 1,
            "d_ff": 64,
            "dropout": 0.0,
            "max_len": 64,
            "tie_output": True,
            "share_embeddings": True,
        },
        "train": {
            "epochs": 2,
            "batch_size": 32,
            "lr": 3e-3,
            "out_dir": str(work / "checkpoints"),
            "precision": "fp32",
            "checkpoint_every_minutes": None,
        },
        "decode": {"beam_size": 1, "max_len_b": 12},
    }
    for section, values in sections.items():
        if isinstance(values, dict):
            cfg.setdefault(section, {}).update(values)
        else:
            cfg[section] = values
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@contextlib.contextmanager
def built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, bool]]:
    """The folder of something a session fixture builds (a trained model), built once per test
    session: under pytest-xdist in the session's base folder, which its workers share, so that
    the first worker to need it builds it and the others wait for it. Yields (folder, built):
    the caller builds into the folder when `built` is False; a build that raises leaves it to
    the next caller."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent  # this session's, not an earlier one's
    else:
        root = tmp_path_factory.mktemp(f"{name}-root")
    folder, done = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        built = done.exists()
        folder.mkdir(exist_ok=True)
        yield folder, built
        done.touch()


def run_tfm(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 300,
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """Run `tfm` in a process of its own (as a user would) and capture its output: a fork of
    this test process's zygote (tests/zygote.py: the imports done once) where the environment
    allows, else (or with `fresh`) a new `python -m transformer_cli`."""
    zygote = None if fresh else zygote_for(dict(os.environ) if env is None else env)
    if zygote is not None:
        return zygote.run(*args, cwd=cwd, input=input, env=env, timeout=timeout)
    return subprocess.run(
        [sys.executable, "-m", "transformer_cli", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def zygote_for(env: dict[str, str]) -> Zygote | None:
    """This test process's zygote where a command under `env` runs forked as it would fresh
    (Zygote.can_run), else None."""
    if not hasattr(os, "fork"):
        return None
    zygote = forks()
    return zygote if zygote.can_run(env) else None


_ZYGOTES: list[Zygote] = []
# The environment the test process started with (conftest imports this module first): the
# zygote imports under it, not under whatever a test had monkeypatched when it came first.
_START_ENV = dict(os.environ)


def forks() -> Zygote:
    """This test process's zygote (tests/zygote.py), started at its first use."""
    if not _ZYGOTES:
        from zygote import Zygote

        _ZYGOTES.append(Zygote(_START_ENV))
        atexit.register(_ZYGOTES[0].close)
    return _ZYGOTES[0]


# sitecustomize.py for `run_tfm_without`: a meta-path finder, first in line, for which the
# modules named in $TFM_TEST_BLOCKED (and their submodules) do not exist.
_BLOCKER = """
import os, sys

BLOCKED = set(filter(None, os.environ.get("TFM_TEST_BLOCKED", "").split(",")))


class NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled)
"""


def run_tfm_without(
    modules: list[str], *args: str, folder: Path, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the installed `tfm` entry point as on an install that lacks `modules` (an extra not
    installed): a sitecustomize.py written to `folder` and put on PYTHONPATH makes them
    unimportable in that process and in any it starts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BLOCKER, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TFM_TEST_BLOCKED": ",".join(modules)}
    return subprocess.run(
        [str(Path(sys.executable).parent / "tfm"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def untrained_checkpoint(path: Path, tokenizers: TokenizerPair | None = None, **model: int | str | bool) -> Path:
    """A real tfm checkpoint of an untrained model (random weights, a joint SentencePiece
    vocabulary fitted on the synthetic corpus, unless `tokenizers` gives a TokenizerPair) in
    well under a second: for tests of loading, exporting and argument checks, which need a
    model but not a good one. `model` updates the (small) TransformerConfig."""
    import torch

    from transformer_cli.checkpoint import Checkpoint
    from transformer_cli.config import Config, TokenizerConfig
    from transformer_cli.model.transformer import Seq2SeqTransformer
    from transformer_cli.model.transformer_config import TransformerConfig
    from transformer_cli.tokenizers.pair import TokenizerPair
    from transformer_cli.tokenizers.subword import SubwordTokenizer

    if tokenizers is None:
        text = [side for pair in sentence_pairs(200) for side in pair]
        tokenizer = SubwordTokenizer.train(text, TokenizerConfig(vocab_size=60), threads=1)
        tokenizers = TokenizerPair(tokenizer, tokenizer, joint=True)
    cfg = Config(name=path.stem)
    settings: dict[str, Any] = {
        "d_model": 32,
        "n_heads": 4,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
        "d_ff": 64,
        "max_len": 64,
        **model,
    }
    cfg.model = TransformerConfig(**settings)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = Seq2SeqTransformer(cfg.model, tokenizers.src.vocab_size, tokenizers.tgt.vocab_size)
    Checkpoint(
        net.ARCHITECTURE, net.src_vocab_size, net.tgt_vocab_size, net.state_dict(), tokenizers.state(), cfg.to_dict()
    ).write(path)
    return path


def encoded_chunk(pairs, lines) -> EncodedChunk:
    """Id pairs and their lines as a chunk a ShardWriter takes."""
    import numpy as np

    from transformer_cli.data.shards import EncodedChunk

    src_text = [f"{a}\n".encode() for a, _ in lines]
    tgt_text = [f"{b}\n".encode() for _, b in lines]
    return EncodedChunk(
        np.array([i for a, _ in pairs for i in a], dtype=np.int64),
        np.array([len(a) for a, _ in pairs]),
        np.array([i for _, b in pairs for i in b], dtype=np.int64),
        np.array([len(b) for _, b in pairs]),
        b"".join(src_text),
        np.array([len(x) for x in src_text]),
        b"".join(tgt_text),
        np.array([len(x) for x in tgt_text]),
    )


def random_id_pairs(n: int, vocab: int, seed: int = 0):
    """n random id pairs of a vocabulary of `vocab` (sources may be empty) and their lines."""
    rng = random.Random(seed)
    pairs = [
        (
            [rng.randrange(vocab) for _ in range(rng.randrange(0, 9))],
            [rng.randrange(vocab) for _ in range(rng.randrange(1, 9))],
        )
        for _ in range(n)
    ]
    lines = [(f"Quelle {i} äöü", f"target {i}") for i in range(n)]
    return pairs, lines


def fit_tokenizers(
    tokenizer_cfg, src_lang: str, tgt_lang: str, src_lines, tgt_lines, threads: int = 1
) -> TokenizerPair:
    """tokenizer.kind's tokenizers fitted on lines held in memory."""
    from transformer_cli.seams import TOKENIZERS
    from transformer_cli.tokenizers.pair import LinesText, TokenizerPair

    text = LinesText(src_lines, tgt_lines, threads)
    src, tgt = TOKENIZERS[tokenizer_cfg.kind].fit(tokenizer_cfg, (src_lang, tgt_lang), text)
    return TokenizerPair(src, tgt, joint=src is tgt)


def config_from_dict(raw: dict):
    """A Config rebuilt from its dict (as a checkpoint records it), checked as it is built."""
    from transformer_cli.config import Config
    from transformer_cli.config_values import build_section

    return build_section(Config, raw, "")


def on_a_small_disk(tmp_path: Path, size: str, script: str, folder: str) -> list[str]:
    """The lines `python -c script DISK/folder` prints when DISK is a tmpfs of `size` (e.g.
    "256k") of its own, in a private mount namespace (`unshare`): a real full disk without
    root. The test is skipped where the machine allows no such namespace."""
    import pytest

    disk = tmp_path / "disk"
    disk.mkdir()
    command = f'mount -t tmpfs -o size={size} tmpfs {disk} && exec {sys.executable} -c "$0" {disk}/{folder}'
    r = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command, script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode != 0 and "unshare" in r.stderr:
        pytest.skip(f"no private mount namespaces here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def ct2_export(checkpoint: Path, output: Path, quantization: str = "none") -> Any:
    """export.bundle.export_checkpoint of the model at `checkpoint`, read as `tfm export`
    reads it (model_io.read_model); its manifest and seconds."""
    from transformer_cli.export.bundle import export_checkpoint
    from transformer_cli.model_io import read_model

    read, _ = read_model(checkpoint)
    return export_checkpoint(read, Path(checkpoint), Path(output), quantization)
