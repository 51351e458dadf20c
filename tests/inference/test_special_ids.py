"""Special ids come from the tokenizer: a model and vocabulary whose `<unk> <pad> <sos> <eos>`
sit at other ids than tfm's (a pretrained model's, say) translate and score exactly like the
same model in tfm's layout. The vocabulary is reversed (the specials become the last four ids)
and the embedding rows with it; nothing else changes."""

from dataclasses import astuple

import pytest
import torch
from helpers import sentence_pairs

from transformer_cli.config import DecodeConfig
from transformer_cli.contracts.tokenizer import SpecialIds
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.pair import TokenizerPair
from transformer_cli.tokenizers.vocab import SPECIALS, TFM_IDS, Vocab
from transformer_cli.tokenizers.word import WordTokenizer

CPU = torch.device("cpu")


def _translators() -> tuple[TorchTranslator, TorchTranslator]:
    pairs = sentence_pairs(60, seed=3)
    blank = WordTokenizer.blank("de", lowercase=True)
    words = sorted({t for de, en in pairs for line in (de, en) for t in blank.split([line])[0]})
    ours = Vocab([*SPECIALS, *words])
    theirs = Vocab(list(reversed(ours.itos)))  # id i here is id V-1-i there
    assert ours.ids == TFM_IDS and theirs.ids == SpecialIds(*(len(ours) - 1 - i for i in astuple(TFM_IDS)))
    cfg = TransformerConfig(
        d_model=32,
        n_heads=4,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=64,
        max_len=64,
        dropout=0.0,
        share_embeddings=True,
        tie_output=True,
    )
    torch.manual_seed(0)
    model = Seq2SeqTransformer(cfg, len(ours), len(ours), ours.ids, ours.ids)
    with torch.no_grad():  # the specials score 0, below the best word: untrained, it says words
        model.generator.weight[list(astuple(ours.ids))] = 0.0
    reversed_model = Seq2SeqTransformer(cfg, len(theirs), len(theirs), theirs.ids, theirs.ids)
    # The rows of the (shared) embedding and the tied output projection follow the ids.
    by_id = ("embedding.weight", "generator.weight")
    state = {k: v.flip(0) if k.endswith(by_id) else v for k, v in model.state_dict().items()}
    assert sum(k.endswith(by_id) for k in state) >= 2
    reversed_model.load_state_dict(state)
    decode = DecodeConfig(beam_size=1, max_len_b=12)
    ordered, reversed_ids = (
        TorchTranslator(
            m.eval(),
            TokenizerPair(WordTokenizer("de", v, True, (), ()), WordTokenizer("en", v, True, (), ()), joint=True),
            CPU,
            decode,
        )
        for m, v in ((model, ours), (reversed_model, theirs))
    )
    return ordered, reversed_ids


def test_a_vocabulary_with_its_specials_elsewhere_translates_and_scores_the_same():
    ours, theirs = _translators()
    lines = [de for de, _ in sentence_pairs(8, seed=5)]
    for beam in (1, 3):
        d = DecodeConfig(beam_size=beam, n_best=min(beam, 2), max_len_b=12)
        a, b = ours.translate(lines, d).translations, theirs.translate(lines, d).translations
        assert [[t.text for t in n] for n in a] == [[t.text for t in n] for n in b]
        v = ours.tokenizers.tgt.vocab_size  # id i in ours is id v-1-i in theirs
        assert [[[v - 1 - i for i in t.tokens] for t in n] for n in a] == [[t.tokens for t in n] for n in b]
        assert any(t.text for n in a for t in n)  # the model says something (untrained, but not nothing)
        scores = [[t.score for t in n] for n in b]
        assert [[t.score for t in n] for n in a] == [pytest.approx(row, rel=1e-4) for row in scores]
    pairs = sentence_pairs(10, seed=7)
    splits = [
        EncodedSplit.from_lists(
            t.tokenizers.src.encode_batch([de for de, _ in pairs]),
            t.tokenizers.tgt.encode_batch([en for _, en in pairs]),
        )
        for t in (ours, theirs)
    ]
    nll_ours, tokens_ours = ours.corpus_nll(splits[0])
    nll_theirs, tokens_theirs = theirs.corpus_nll(splits[1])
    assert tokens_ours == tokens_theirs and abs(nll_ours - nll_theirs) <= 1e-4 * abs(nll_ours)
