"""corpus_files.py: the one rule for corpus files in a folder, for the parallel corpus
(data.source) and the monolingual text's folders alike: `<stem>.<lang>` or `<stem>.<lang>.gz`,
exactly one of them; both is refused naming both, none naming the folder, stem and names."""

from __future__ import annotations

import pytest

from transformer_cli.corpus_files import corpus_files, file_names, find_corpus_file
from transformer_cli.errors import UsageError


def touch(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"x\n")
    return folder


def test_a_stems_file_is_plain_or_gzipped_whichever_the_folder_holds(tmp_path):
    assert file_names("val", "de") == ["val.de.gz", "val.de"]
    plain, gzipped = touch(tmp_path / "plain", "val.de"), touch(tmp_path / "gz", "val.de.gz", "val.en")
    assert find_corpus_file(plain, "val", "de") == plain / "val.de"
    assert find_corpus_file(gzipped, "val", "de") == gzipped / "val.de.gz"


def test_both_forms_of_one_stem_are_refused_naming_both(tmp_path):
    folder = touch(tmp_path / "both", "train.de", "train.de.gz")
    with pytest.raises(UsageError) as refused:
        find_corpus_file(folder, "train", "de")
    assert str(refused.value) == (
        f"{folder} holds the de text of 'train' twice, as train.de.gz and train.de: keep one of them"
    )
    # a corpus that allows only its checksummed .gz file reads it, the other form beside it unread
    assert find_corpus_file(folder, "train", "de", ["train.de.gz"]) == folder / "train.de.gz"


def test_a_missing_file_names_the_folder_the_stem_and_the_names_looked_for(tmp_path):
    folder = touch(tmp_path / "corpus", "val.de", "val.en.txt")
    with pytest.raises(UsageError) as refused:
        find_corpus_file(folder, "val", "en")
    assert str(refused.value) == f"{folder} has no en file of 'val': looked for val.en.gz or val.en"
    assert find_corpus_file(folder, "val", "en", ["val.en.txt"]) == folder / "val.en.txt"  # a corpus's own names


def test_a_folder_gives_one_file_per_stem_in_name_order(tmp_path):
    folder = touch(tmp_path / "text", "b.en", "a.en.gz", "a.b.en", "c.de", "notes.txt", "en")
    (folder / "d.en").mkdir()  # not a file
    assert corpus_files(folder, "en") == [folder / "a.b.en", folder / "a.en.gz", folder / "b.en"]
    assert corpus_files(folder, "fr") == []
    touch(folder, "b.en.gz")
    with pytest.raises(UsageError, match=r"holds the en text of 'b' twice, as b.en.gz and b.en: keep one"):
        corpus_files(folder, "en")
