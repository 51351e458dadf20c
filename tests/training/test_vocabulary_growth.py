"""A parent's weights for a model of its grown vocabulary (training/vocabulary_growth.py): every
vocabulary-sized weight keeps its rows and gains one per new piece, the mean of the rows of the
old pieces that spell it; the run folder's store gives the same tokenizers back for that parent
only. (A night that grows, end to end: test_retrain_policy.py.)"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import torch
from helpers import poodle_pairs, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.errors import UsageError
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.growth import GrowthRule, appended, new_pieces, scored, tiling
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.tokenizers.subword import SubwordTokenizer
from transformer_cli.tokenizers.vocab import SPECIALS, Vocab
from transformer_cli.tokenizers.word import WordTokenizer
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.vocabulary_growth import grow, grown_weights, stored_growth


def _model(pair: TokenizerPair, **settings: Any) -> Seq2SeqTransformer:
    cfg = TransformerConfig(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, **settings)
    return Seq2SeqTransformer(cfg, pair.src.vocab_size, pair.tgt.vocab_size)


def _pairs() -> tuple[TokenizerPair, TokenizerPair]:
    """A BPE tokenizer and its growth by a topic's pieces."""
    settings = TokenizerConfig(kind="sentencepiece", model_type="bpe", vocab_size=220)
    lines = [side for pair in sentence_pairs(300, seed=1) for side in pair]
    new = lines + [side for pair in poodle_pairs(60, seed=2) for side in pair]
    old, fitted = SubwordTokenizer.train(lines, settings, 1), SubwordTokenizer.train(new, settings, 1)
    added = new_pieces(old, fitted, new, GrowthRule(20, 100)).added
    grown = appended(old, scored(old, fitted, added))
    return TokenizerPair(old, old, joint=True), TokenizerPair(grown, grown, joint=True)


@pytest.mark.parametrize("settings", [{}, {"share_embeddings": True, "tie_output": True, "output_bias": True}])
def test_vocabulary_sized_weights_keep_their_rows_and_start_new_ones_from_the_pieces_that_spell_them(settings):
    parent, pair = _pairs()
    old, new = _model(parent, **settings), _model(pair, **settings)
    weights = {k: v.clone() for k, v in old.state_dict().items()}
    if "generator.bias" in weights:
        weights["generator.bias"].uniform_()
    grown = grown_weights(weights, parent, pair, new.state_dict())
    new.load_state_dict(grown)  # every shape fits
    n, piece = parent.src.vocab_size, pair.src.id_to_token([parent.src.vocab_size + 2])[0]
    spelled = tiling(parent.src, piece)
    for name in ("encoder.embed.embedding.weight", "decoder.embed.embedding.weight", "generator.weight"):
        assert grown[name].shape[0] == pair.src.vocab_size
        assert torch.equal(grown[name][:n], weights[name])
        assert torch.allclose(grown[name][n + 2], weights[name][spelled].mean(dim=0))
    if "generator.bias" in weights:
        assert torch.allclose(grown["generator.bias"][n + 2], weights["generator.bias"][spelled].mean())
    unchanged = [k for k in weights if "embed" not in k and not k.startswith("generator")]
    assert all(grown[k] is weights[k] for k in unchanged)


def test_a_weight_that_does_not_grow_with_the_vocabulary_is_named():
    parent, pair = _pairs()
    weights = _model(parent).state_dict()
    shapes = dict(_model(pair).state_dict())
    shapes["encoder.layers.0.ff_block.norm.weight"] = torch.zeros(17)
    with pytest.raises(UsageError, match=r"encoder.layers.0.ff_block.norm.weight \(16,\) does not grow to \(17,\)"):
        grown_weights(weights, parent, pair, shapes)


def test_the_stored_pieces_give_the_grown_tokenizers_back_for_their_parent_only(tmp_path):
    parent, pair = _pairs()
    run = RunDir(tmp_path)
    added = pair.src.id_to_token(range(parent.src.vocab_size, pair.src.vocab_size))
    scores = [pair.src.sp.get_score(parent.src.vocab_size + k) for k in range(len(added))]
    stored = {"parent_sha256": "abc", "added": {"shared": [[p, s] for p, s in zip(added, scores)]}}
    run.vocabulary.write_text(json.dumps(stored))
    assert stored_growth(run, parent, "other") is None  # stored for another parent
    back = stored_growth(run, parent, "abc")
    assert back is not None and back.vocabulary_digest() == pair.vocabulary_digest()
    run.vocabulary.write_text("{not json")
    assert stored_growth(run, parent, "abc") is None  # unreadable: the night decides again


def test_a_tokenizer_of_another_kind_keeps_its_vocabulary_with_a_warning(tmp_path, caplog):
    word = WordTokenizer("de", Vocab([*SPECIALS, "hund"]), False, (), ())
    pair, run = TokenizerPair(word, word, joint=True), RunDir(tmp_path)
    run.vocabulary.write_text('{"parent_sha256": "abc", "added": {}}')  # an earlier night's
    nothing: Any = None  # (not read: the kind decides first)
    with caplog.at_level(logging.WARNING, logger="tfm"):
        assert grow(nothing, run, pair, "abc", nothing, nothing) is pair
    assert "tokenizer (spacy) cannot grow: its vocabulary is kept" in caplog.text
    assert not run.vocabulary.exists()
