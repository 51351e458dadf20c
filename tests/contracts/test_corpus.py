"""contracts/corpus.py: ParallelCorpus (CORPORA's entries: where a parallel corpus's files are,
their checksums and names) and NamedText (TEXT_CORPORA's: a monolingual corpus's files at a URL);
what a parallel corpus inherits: no default source, no checksums, the names of the folder rule."""

from __future__ import annotations

from transformer_cli.contracts.corpus import NamedText, ParallelCorpus
from transformer_cli.corpus_files import file_names
from transformer_cli.data.sources import FILES, MULTI30K
from transformer_cli.seams import CORPORA, TEXT_CORPORA
from transformer_cli.synthetic.corpora import MULTI30K_TASK2


def test_a_parallel_corpus_inherits_no_source_no_checksums_and_the_folder_rule():
    corpus = ParallelCorpus()
    assert corpus.settings is None and corpus.default_source(None) is None and corpus.checksums(None) == {}
    assert corpus.file_names("train", "de", None) == file_names("train", "de") == ["train.de.gz", "train.de"]


def test_a_named_text_is_gzipped_files_of_its_stems():
    text = NamedText("https://example.org/text/", ("a", "b"), {})
    assert text.names("en") == ["a.en.gz", "b.en.gz"]


def test_tfms_corpora_are_entries_of_the_contracts():
    assert (CORPORA["multi30k"], CORPORA["files"]) == (MULTI30K, FILES)
    assert isinstance(MULTI30K, ParallelCorpus) and MULTI30K.file_names("val", "en", None) == ["val.en.gz"]
    assert TEXT_CORPORA["multi30k-task2"] is MULTI30K_TASK2 and isinstance(MULTI30K_TASK2, NamedText)
    assert MULTI30K_TASK2.names("de")[0] == "train.1.de.gz"
