"""synthetic/corpora.py: where monolingual text comes from: `parallel` (a side of the config's
own training corpus), files and folders (every *.<lang> and *.<lang>.gz, in name order, one a
stem: corpus_files.py), or
a corpus known by name, read from $TFM_TEXT_SOURCES/<name>/ or beside $TFM_DATA_SOURCE before
any download; anything else one line naming the key."""

from __future__ import annotations

import pytest
from helpers import write_config

from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError
from transformer_cli.fsutil import file_sha256
from transformer_cli.seams import TEXT_CORPORA
from transformer_cli.synthetic.corpora import PARALLEL, TEXT_SOURCES_ENV, TextFile, text_files

KEY = "synthetic.back_translation.text"


@pytest.fixture
def cfg(tmp_path, corpus_dir):
    return load_config(str(write_config(tmp_path / "c.yaml", tmp_path, corpus_dir)))


def test_parallel_is_the_training_corpus_side_of_that_language(cfg, corpus_dir):
    [en] = text_files(cfg, [PARALLEL], "en", KEY)
    assert en == TextFile(corpus_dir / "train.en.gz", file_sha256(corpus_dir / "train.en.gz"))
    assert text_files(cfg, [PARALLEL], "de", KEY)[0].path == corpus_dir / "train.de.gz"


def test_files_and_folders_give_their_files_of_the_language_in_name_order(cfg, tmp_path):
    folder = tmp_path / "text"
    folder.mkdir()
    for name in ("b.en", "a.en.gz", "c.de", "notes.txt"):
        (folder / name).write_bytes(b"x\n")
    single = tmp_path / "one.txt"
    single.write_text("A dog.\n")
    found = text_files(cfg, [str(folder), str(single)], "en", KEY)
    assert [f.path for f in found] == [folder / "a.en.gz", folder / "b.en", single]
    assert found[2].sha256 == file_sha256(single)
    with pytest.raises(UsageError, match=f"^{KEY}: {folder} holds no \\*.fr or \\*.fr.gz file$"):
        text_files(cfg, [str(folder)], "fr", KEY)
    (folder / "b.en.gz").write_bytes(b"x\n")  # one text, two files: neither read over the other
    with pytest.raises(UsageError) as refused:
        text_files(cfg, [str(folder)], "en", KEY)
    assert str(refused.value) == (
        f"{KEY}: {folder} holds the en text of 'b' twice, as b.en.gz and b.en: keep one of them"
    )
    with pytest.raises(UsageError, match=f"^{KEY}: 'nope' is not a known corpus \\(multi30k-task2\\), `parallel`"):
        text_files(cfg, ["nope"], "en", KEY)


def test_a_named_corpus_is_read_from_a_local_folder_before_any_download(cfg, tmp_path, monkeypatch):
    corpus = TEXT_CORPORA.find("multi30k-task2")
    assert corpus is not None and corpus.names("en") == [f"train.{i}.en.gz" for i in range(1, 6)]
    assert set(corpus.sha256) == {name for lang in ("de", "en") for name in corpus.names(lang)}
    local = tmp_path / "sources" / "multi30k-task2"
    local.mkdir(parents=True)
    monkeypatch.setenv(TEXT_SOURCES_ENV, str(tmp_path / "sources"))
    with pytest.raises(UsageError, match=f"{local} is missing train.1.en.gz"):  # looked there, not online
        text_files(cfg, ["multi30k-task2"], "en", KEY)
    monkeypatch.delenv(TEXT_SOURCES_ENV)
    task1 = tmp_path / "sources" / "multi30k"
    task1.mkdir()
    monkeypatch.setenv("TFM_DATA_SOURCE", str(task1))  # task 2 beside task 1
    with pytest.raises(UsageError, match=f"{local} is missing train.1.de.gz"):
        text_files(cfg, ["multi30k-task2"], "de", KEY)
    (local / "train.1.de.gz").write_bytes(b"not the real file")
    with pytest.raises(UsageError, match="checksum mismatch for .*train.1.de.gz"):  # its checksum is known
        text_files(cfg, ["multi30k-task2"], "de", KEY)
