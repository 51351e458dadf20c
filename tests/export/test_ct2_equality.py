"""A float32 CTranslate2 export decodes exactly as tfm does; int8 stays close.

Measured on the four tiny models of conftest.py over the synthetic test set plus harder lines
(unseen word combinations, unknown words, an empty line, an input long enough to be truncated
and to run into the output limit): greedy and beam-5 outputs are identical token for token,
all five beam hypotheses included, so no ties are allowed for; scores agree to 1e-4.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from conftest import VARIANTS
from transformer_cli.data.batching import EncodedSplit
from transformer_cli.data.sources import read_lines
from transformer_cli.evaluate import corpus_nll, score_translations
from transformer_cli.export.ct2_translator import Ct2Translator
from transformer_cli.inference.translate import Translator

HARD = ["Ein mädchen trägt zwei hunde am park.", "Xylophon Quatsch zzz 123 ÄÖÜ!", "",
        "Zwei hunde.", " ".join(["Ein mann sieht einen ball im park."] * 9)]


def evaluation_lines(corpus_dir) -> list[str]:
    return read_lines(corpus_dir / "test_2016_flickr.de.gz") + HARD


def references(corpus_dir) -> list[str]:
    return read_lines(corpus_dir / "test_2016_flickr.en.gz")


@pytest.fixture(scope="module")
def pairs(models):
    """name -> (tfm Translator, float32 export's Ct2Translator), both on 1 CPU thread."""
    torch.set_num_threads(1)
    return {name: (Translator.from_checkpoint(m["checkpoint"], torch.device("cpu")),
                   Ct2Translator(m["fp32"], "cpu", threads=1)) for name, m in models.items()}


def decode(translator, lines, beam_size, n_best=1):
    d = dataclasses.replace(translator.decode, beam_size=beam_size, n_best=n_best)
    return translator.translate(lines, d)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("beam_size", [1, 5])
def test_float32_export_decodes_like_tfm(pairs, corpus_dir, name, beam_size):
    tfm, ct2 = pairs[name]
    lines = evaluation_lines(corpus_dir)
    n_best = 5 if beam_size > 1 else 1
    ours, theirs = decode(tfm, lines, beam_size, n_best), decode(ct2, lines, beam_size, n_best)
    assert tfm.truncated == ct2.truncated and tfm.truncated  # the long line was cut, alike
    for line, a, b in zip(lines, ours, theirs):
        assert [h.tokens for h in a] == [h.tokens for h in b], line
        assert [h.text for h in a] == [h.text for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


@pytest.mark.parametrize("name", VARIANTS)
def test_int8_export_keeps_bleu(models, pairs, corpus_dir, name):
    refs = references(corpus_dir)
    lines = evaluation_lines(corpus_dir)[: len(refs)]
    int8 = Ct2Translator(models[name]["int8"], "cpu", threads=1)
    lowercase = pairs[name][0].tokenizers.tgt.lowercase
    bleu = {label: score_translations([h[0].text for h in decode(t, lines, 5)], refs, lowercase).bleu
            for label, t in (("tfm", pairs[name][0]), ("int8", int8))}
    assert bleu["tfm"] > 50  # the tiny models have learned the synthetic language
    assert abs(bleu["int8"] - bleu["tfm"]) <= 1.0, bleu


@pytest.mark.parametrize("name", VARIANTS)
def test_teacher_forced_loss_and_attention_match(pairs, corpus_dir, name):
    tfm, ct2 = pairs[name]
    tok = tfm.tokenizers
    lines, refs = evaluation_lines(corpus_dir)[:40], references(corpus_dir)
    split = EncodedSplit.from_lists(tok.src.encode_batch(lines), tok.tgt.encode_batch(refs))
    nll, n = corpus_nll(tfm.model, split, torch.device("cpu"), None, max_len=tfm.model.config.max_len)
    assert ct2.corpus_nll(split) == pytest.approx((float(nll), int(n)), rel=1e-4)
    best = tfm.translate([lines[0]])[0][0]
    src_a, tgt_a, weights_a = tfm.cross_attention(lines[0], best)
    src_b, tgt_b, weights_b = ct2.cross_attention(lines[0], best)
    assert (src_a, tgt_a) == (src_b, tgt_b)
    assert torch.allclose(weights_a, weights_b, atol=1e-5)
