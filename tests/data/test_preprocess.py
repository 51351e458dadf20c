import gzip
import json

import pytest
import torch
from helpers import run_tfm, write_config, write_corpus

from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared


def test_preprocess_end_to_end(tmp_path, corpus_dir):
    cfg_path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir)
    r = run_tfm("preprocess", "--config", str(cfg_path))
    assert r.returncode == 0, r.stderr
    assert "train    300" in r.stdout and "vocab (sentencepiece) (joint): de 120, en 120" in r.stdout
    folder = tmp_path / "data" / "small"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["splits"]["val"]["pairs"] == 40 and len(manifest["files"]) == 6
    assert manifest["versions"]["torch"] == torch.__version__
    assert (folder / "config.yaml").read_text() == load_config(str(cfg_path)).to_yaml()

    prepared = load_prepared(load_config(str(cfg_path)))
    train = prepared.split("train")
    assert len(train) == 300 and prepared.manifest.id_dtype == "uint16"
    assert train.shards[0].src.dtype.name == "uint16"  # memory-mapped, not loaded
    _, tgt = train.pair(0)
    first_en = gzip.open(corpus_dir / "train.en.gz", "rt").readline().strip()
    assert prepared.tokenizers.tgt.decode(tgt.tolist()) == first_en
    first_test = gzip.open(corpus_dir / "test_2016_flickr.en.gz", "rt").readline().strip()
    assert prepared.text("test", "en")[0] == first_test


@pytest.mark.slow  # several tfm preprocess processes
def test_rerun_is_a_no_op_and_changes_rebuild(tmp_path, corpus_dir):
    cfg_path = write_config(tmp_path / "small.yaml", tmp_path, corpus_dir)
    assert run_tfm("preprocess", "-c", str(cfg_path), "-q").returncode == 0
    manifest = tmp_path / "data" / "small" / "manifest.json"
    first = manifest.read_text()
    r = run_tfm("preprocess", "-c", str(cfg_path))
    assert r.returncode == 0 and "up to date" in r.stderr and manifest.read_text() == first
    r = run_tfm("preprocess", "-c", str(cfg_path), "--set", "tokenizer.vocab_size=100")
    assert r.returncode == 0 and "rebuilding" in r.stderr
    assert json.loads(manifest.read_text())["vocab_size"]["tgt"] == 100
    # a changed input file (same config) rebuilds too
    write_corpus(corpus_dir.parent / "changed", {"train": 200, "val": 40, "test_2016_flickr": 40})
    r = run_tfm("preprocess", "-c", str(cfg_path), "--source", str(corpus_dir.parent / "changed"))
    assert r.returncode == 0 and json.loads(manifest.read_text())["splits"]["train"]["pairs"] == 200


@pytest.mark.slow
def test_spacy_pipeline_and_length_filter(tmp_path, corpus_dir):
    cfg_path = write_config(
        tmp_path / "words.yaml",
        tmp_path,
        corpus_dir,
        tokenizer={"kind": "spacy", "lowercase": True, "min_freq": 2},
        model={"share_embeddings": False, "tie_output": False},
        data={"train_max_len": 8, "min_train_pairs": 10},
    )
    r = run_tfm("preprocess", "-c", str(cfg_path))
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "data" / "words" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["src_len"]["max"] <= 8
    assert manifest["dropped"]["too_long_train_pairs"] > 0
    assert "longer than data.train_max_len" in r.stdout


def test_bad_input_leaves_no_output(tmp_path):
    folder = write_corpus(tmp_path / "corpus")
    (folder / "val.en.gz").write_bytes(gzip.compress(b"one\ntwo\n"))  # 2 lines against 40
    cfg_path = write_config(tmp_path / "bad.yaml", tmp_path, folder)
    r = run_tfm("preprocess", "-c", str(cfg_path))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("tfm: error: misaligned corpus:")
    assert "Traceback" not in r.stderr
    # No data folder, nor a work folder: only the (empty) lock file that guards it.
    assert [p.name for p in (tmp_path / "data").iterdir()] == [".bad.lock"]


def test_unchanged_files_are_not_reread_and_verify_reads_them_all(tmp_path):
    """A start trusts the sums of files that kept their recorded size and modification time;
    `verify` reads every file: a change that restored both is found only then."""
    import os

    from transformer_cli.data.preprocess import prepare

    corpus = write_corpus(tmp_path / "corpus", gz=False)
    cfg = load_config(str(write_config(tmp_path / "v.yaml", tmp_path, corpus)))
    prepared, rebuilt = prepare(cfg)
    assert rebuilt and all("mtime_ns" in r for r in prepared.manifest.source_files.values())

    def rewrite_keeping_size_and_time(path, old, new):
        st = path.stat()
        path.write_bytes(path.read_bytes().replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size

    val = cfg.data_dir / "val.en.txt"
    rewrite_keeping_size_and_time(val, b"A man", b"A dog")  # damage that keeps size and time
    assert not prepare(cfg)[1]  # trusted: not read, not rebuilt
    assert prepare(cfg, verify=True)[1]  # read: damaged, rebuilt
    assert "A man" in val.read_text()
    val.touch()  # a new modification time, same bytes: read again, found intact
    assert not prepare(cfg)[1]

    source = corpus / "train.de"
    rewrite_keeping_size_and_time(source, b"Ein mann", b"Ein kind")  # the corpus changed alike
    assert not prepare(cfg)[1]
    assert prepare(cfg, verify=True)[1]  # inputs changed: rebuilt from the new corpus


def test_the_truecaser_is_learned_once_by_preprocessing_and_stored(tmp_path, corpus_dir):
    from transformer_cli.data.preprocess import prepare
    from transformer_cli.tokenizers.pair import TokenizerPair
    from transformer_cli.tokenizers.truecase import Truecaser

    cfg = load_config(str(write_config(tmp_path / "tc.yaml", tmp_path, corpus_dir)))
    prepared, _ = prepare(cfg)
    stored = TokenizerPair.load(cfg.data_dir).recaser  # in tokenizer.json, not refitted on load
    expected = Truecaser.fit(prepared.text("train", "de"))
    assert stored is not None and stored.state() == expected.state()
    assert load_prepared(cfg).tokenizers.recaser.state() == expected.state()
