"""data/encoding.py: what preprocessing's workers do to a chunk of pairs: encode both sides
with the tokenizers set up once per worker, drop training pairs with a side past
data.train_max_len, count <unk> ids and the kept sources' spellings, and keep the lines; too
few training pairs left is an error that says what was left out."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import untrained_checkpoint, write_config

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.data import encoding
from transformer_cli.data.encoding import EncodeSettings, SplitStats, check_enough, encode_chunk
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.pair import TokenizerPair


def test_encode_chunk_drops_long_pairs_counts_unknowns_and_spellings(tmp_path):

    state = Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")).tokenizer
    encoding.setup(state, EncodeSettings("uint16", train_max_len=20, count_spellings=True))
    sources = ["Ein Mann sieht einen Ball.", "Ein " * 30 + "Ball.", "Zwei Hunde ✈."]  # 16, 34, 14 ids
    targets = ["A man sees a ball.", "A ball.", "Two dogs ✈."]
    result = encode_chunk((sources, targets))
    assert result.too_long == 1 and len(result.chunk) == 2
    assert result.chunk.src_ids.dtype == np.uint16
    assert result.unknown[0] >= 1 and result.unknown[1] >= 1  # ✈ is in no vocabulary here
    assert result.spellings["Mann"] == result.spellings["Hunde"] == 1 and result.spellings["Ball"] == 1
    assert result.chunk.src_text == "".join(f"{s}\n" for s in (sources[0], sources[2])).encode()


def test_without_a_length_limit_every_pair_is_kept_and_spellings_are_not_counted(tmp_path):
    state = Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")).tokenizer
    encoding.setup(state, EncodeSettings("int32"))
    sources, targets = ["Ein " * 30 + "Ball.", ""], ["A ball.", ""]
    result = encode_chunk((sources, targets))
    pair = TokenizerPair.from_state(state)
    assert result.too_long == 0 and not result.spellings and len(result.chunk) == 2
    assert result.chunk.src_ids.dtype == np.int32
    assert result.chunk.src_ids.tolist() == pair.src.encode_batch(sources)[0]  # the empty line: no ids
    assert result.chunk.src_lengths.tolist() == [len(pair.src.encode(sources[0])), 0]


def test_too_few_training_pairs_is_an_error_that_says_what_was_left_out(tmp_path):
    cfg = load_config(str(write_config(tmp_path / "c.yaml", tmp_path, tmp_path, data={"min_train_pairs": 10})))
    check_enough(cfg, SplitStats(pairs=7, too_long=2), empty=1, beside=3)  # 7 + 3 made
    with pytest.raises(UsageError) as e:
        check_enough(cfg, SplitStats(pairs=6, too_long=2), empty=1, beside=3)
    assert str(e.value) == (
        "only 6 training pairs are left of 9 (1 empty, 2 longer than data.train_max_len=40 tokens), and 3 made "
        "by translating text; at least data.min_train_pairs=10 are needed"
    )
