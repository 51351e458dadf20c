"""data/grown_chunk.py: a worker's chunk of a vocabulary-growing night holds what a whole
build's worker makes of it with the grown tokenizers (ids, lengths, lines, pairs left out as
too long, unknown ids, spellings), though only the pairs that hold an added piece were encoded
and the others' ids came from the folder's shards; `take` gathers pairs' ids in any order."""

from __future__ import annotations

import numpy as np
from helpers import grown_tokenizers, poodle_pairs, write_config, write_corpus

from transformer_cli.config_loading import load_config
from transformer_cli.data import encoding, grown_chunk
from transformer_cli.data.encoding import EncodeSettings, encode_chunk
from transformer_cli.data.freshness import GivenTokenizers
from transformer_cli.data.grown_chunk import Job, encode_grown, take
from transformer_cli.data.preprocess import prepare
from transformer_cli.tokenizers.growth_reach import Reach, reach
from transformer_cli.tokenizers.pair import TokenizerPair

MAX_LEN = 30


def test_a_chunk_holds_what_a_whole_builds_worker_makes_of_it(tmp_path):
    parent, grown = grown_tokenizers("bpe")
    corpus = write_corpus(tmp_path / "corpus", {"train": 40, "val": 5, "test_2016_flickr": 5}, gz=False)
    for lang, side in (("de", 0), ("en", 1)):  # pairs of the folder's that hold an added piece
        with open(corpus / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write("".join(f"{p[side]}\n" for p in poodle_pairs(5, seed=5)))
    path = write_config(tmp_path / "c.yaml", tmp_path, corpus, data={"train_max_len": MAX_LEN, "min_train_pairs": 10})
    given = GivenTokenizers(TokenizerPair(parent, parent, joint=True), {"from": "published", "sha256": "0" * 64})
    before, _ = prepare(load_config(str(path)), given=given)
    sources, targets = next(before.text_pairs("train"))
    assert len(before.split("train")) == len(sources) == 45  # (none left out)
    topic = poodle_pairs(6, seed=4)
    long = [(" ".join(["Ein pudel"] * 20), "A poodle ."), (" ".join(["Ein Mann"] * 20), "A man .")]  # too long
    # the folder's pairs, with others between them (which it does not hold), two too long
    pairs = [*zip(sources[:10], targets[:10]), *topic[:3], *long, *zip(sources[10:45], targets[10:45]), *topic[3:]]
    held = np.array([*range(10), -1, -1, -1, -1, -1, *range(10, 45), -1, -1, -1])
    chunk = ([s for s, _ in pairs], [t for _, t in pairs])
    pair = TokenizerPair(grown, grown, joint=True)
    found = reach(parent, grown)
    assert isinstance(found, Reach)
    grown_chunk.setup(pair.state(), (list(found.added), list(found.added)), before, "uint16")
    result, touched = encode_grown(Job(chunk, "train", held, MAX_LEN, True))
    encoding.setup(pair.state(), EncodeSettings("uint16", MAX_LEN, True))
    whole = encode_chunk(chunk)

    assert 0 < touched < len(pairs) and result.too_long == 2
    assert found.touched(sources[40:]).all()  # (some of the folder's pairs are encoded again)
    assert (result.too_long, result.unknown, result.spellings) == (whole.too_long, whole.unknown, whole.spellings)
    for field in ("src_ids", "src_lengths", "tgt_ids", "tgt_lengths", "src_line_bytes", "tgt_line_bytes"):
        got, expected = getattr(result.chunk, field), getattr(whole.chunk, field)
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist(), field
    assert (result.chunk.src_text, result.chunk.tgt_text) == (whole.chunk.src_text, whole.chunk.tgt_text)


def test_take_gathers_pairs_in_the_order_asked():
    flat, offsets = np.array([1, 2, 3, 4, 5, 6]), np.array([0, 2, 2, 5, 6])  # [1 2] [] [3 4 5] [6]
    ids, lengths = take((flat, offsets), np.array([3, 0, 2, 1]))
    assert ids.tolist() == [6, 1, 2, 3, 4, 5] and lengths.tolist() == [1, 2, 3, 0]
    ids, lengths = take((flat, offsets), np.array([], dtype=np.int64))
    assert ids.tolist() == [] and lengths.tolist() == []
