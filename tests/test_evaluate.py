"""evaluate.py: teacher-forced loss/perplexity and sacreBLEU scores."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import fit_tokenizers, sentence_pairs

from transformer_cli.config import DecodeConfig, TokenizerConfig
from transformer_cli.data.batching import collate
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.evaluate import evaluate_texts, loss_result, score_translations
from transformer_cli.inference.teacher_forcing import corpus_nll
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.loss import sequence_loss
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import PAD, TFM_IDS, Framing

CPU = torch.device("cpu")


def _model(vocab: int = 30) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=32)
    return Seq2SeqTransformer(cfg, vocab, vocab)


def _split(n: int = 12, vocab: int = 30) -> EncodedSplit:
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(1, 9, (2, n), generator=g).tolist()
    seqs = [[torch.randint(4, vocab, (k,), generator=g).tolist() for k in side] for side in lengths]
    return EncodedSplit.from_lists(*seqs)


def test_loss_result_is_the_mean_per_token_and_its_exponent():
    r = loss_result(torch.tensor(6.0), torch.tensor(4))
    assert (r.loss, r.n_tokens) == (1.5, 4) and math.isclose(r.ppl, math.exp(1.5))
    assert loss_result(torch.tensor(0.0), torch.tensor(0)).loss == 0.0  # no tokens: no division
    assert loss_result(torch.tensor(1e6), torch.tensor(1)).ppl == math.exp(50.0)  # capped


def test_corpus_nll_is_the_summed_nll_of_all_pairs_and_keeps_the_train_mode():
    model, split = _model(), _split()
    model.train()
    nll, tokens = corpus_nll(model, split, CPU, None, batch_tokens=40)
    assert model.training  # restored after the eval-mode pass
    model.eval()
    whole = collate(split, range(len(split)), Framing(TFM_IDS, TFM_IDS))  # one batch: padding must not change the sum
    with torch.no_grad():
        expected = sequence_loss(model(whole.src, whole.tgt_in), whole.tgt_out, PAD)[1]
    assert int(tokens) == whole.n_tokens
    assert torch.allclose(nll, expected, rtol=1e-5)


def test_corpus_nll_shards_add_up_to_the_whole_and_stop_between_batches():
    model, split = _model(), _split()
    whole = corpus_nll(model, split, CPU, None, batch_tokens=40)
    shards = [corpus_nll(model, split, CPU, None, batch_tokens=40, shard=(r, 2)) for r in (0, 1)]
    assert int(shards[0][1] + shards[1][1]) == int(whole[1])
    assert torch.allclose(shards[0][0] + shards[1][0], whole[0], rtol=1e-5)
    calls = []

    def stop_at_the_second_batch():
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        corpus_nll(model, split, CPU, None, batch_tokens=40, check_stop=stop_at_the_second_batch)


def test_scores_come_from_sacrebleu_with_its_signature():
    from sacrebleu.metrics import BLEU, CHRF

    refs = ["A man sees a dog.", "Two dogs play in the park.", "A girl holds a red ball."]
    hyps = ["A man sees the dog.", "Two dogs play in a park.", "a girl holds a red ball."]
    s = score_translations(hyps, refs)
    assert s.bleu == round(BLEU().corpus_score(hyps, [refs]).score, 2)
    assert s.chrf == round(CHRF().corpus_score(hyps, [refs]).score, 2)
    assert "case:mixed" in s.signature and score_translations(refs, refs).bleu == 100.0
    lowercased = score_translations(hyps, refs, lowercase=True)
    assert "case:lc" in lowercased.signature and lowercased.bleu > s.bleu


def test_evaluate_texts_reports_what_it_measured_and_writes_the_hypotheses(tmp_path):
    pairs = sentence_pairs(60)
    de, en = [p[0] for p in pairs], [p[1] for p in pairs]
    tokenizers = fit_tokenizers(TokenizerConfig(kind="spacy", min_freq=1), "de", "en", de, en)
    model = _model(max(tokenizers.src.vocab_size, tokenizers.tgt.vocab_size)).eval()
    translator = TorchTranslator(model, tokenizers, CPU, DecodeConfig(beam_size=1, max_len_b=5))
    out = tmp_path / "hyp.txt"
    report = evaluate_texts(translator, de[:8], en[:8], "val", "model.pt", out)
    hypotheses = out.read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == report.n_sentences == 8 and report.hypotheses == str(out)
    assert report.bleu == score_translations(hypotheses, en[:8], lowercase=False).bleu
    split = EncodedSplit.from_lists(tokenizers.src.encode_batch(de[:8]), tokenizers.tgt.encode_batch(en[:8]))
    expected = loss_result(*corpus_nll(model, split, CPU, None, max_positions=32))
    assert report.loss == round(expected.loss, 5) and report.ppl == round(expected.ppl, 4)
    assert report.as_json()["beam_size"] == 1 and "greedy" in report.as_table()


def test_evaluate_beam_size_option_narrows_the_configs_n_best_and_keeps_the_bounds(tmp_path, corpus_dir):
    """`--beam-size 1` on a config asking for 3-best (beam 4) evaluates greedy; the option has the
    config's bounds."""
    import json

    from helpers import untrained_checkpoint, write_config
    from typer.testing import CliRunner

    from transformer_cli.cli import app

    cfg = write_config(tmp_path / "nbest.yaml", tmp_path, corpus_dir, decode={"beam_size": 4, "n_best": 3})
    pairs = sentence_pairs(3)
    for lang, lines in (("de", [p[0] for p in pairs]), ("en", [p[1] for p in pairs])):
        (tmp_path / f"news.{lang}").write_text("".join(f"{x}\n" for x in lines))
    args = [
        "evaluate",
        "-c",
        str(cfg),
        "--checkpoint",
        str(untrained_checkpoint(tmp_path / "m.pt")),
        "--src",
        str(tmp_path / "news.de"),
        "--ref",
        str(tmp_path / "news.en"),
        "--json",
    ]
    greedy = CliRunner().invoke(app, [*args, "--beam-size", "1"])
    assert greedy.exit_code == 0, greedy.output
    assert json.loads(greedy.stdout)["hypotheses"].endswith("news.de.beam1.txt")
    too_wide = CliRunner().invoke(app, [*args, "--beam-size", "257"])
    assert (too_wide.exit_code, too_wide.stderr) == (
        2,
        "tfm: error: beam_size must be an integer >= 1 and <= 256 (got 257)\n",
    )


def test_evaluate_scores_the_published_model_by_default_like_translate(tmp_path, corpus_dir):
    """Without --checkpoint, evaluate picks what translate, serve and export pick: published.pt,
    else best.pt."""
    import json
    import shutil

    from helpers import untrained_checkpoint, write_config
    from typer.testing import CliRunner

    from transformer_cli.cli import app

    cfg = write_config(tmp_path / "pick.yaml", tmp_path, corpus_dir)
    run = tmp_path / "checkpoints" / "pick"
    run.mkdir(parents=True)
    pairs = sentence_pairs(3)
    for lang, lines in (("de", [p[0] for p in pairs]), ("en", [p[1] for p in pairs])):
        (tmp_path / f"news.{lang}").write_text("".join(f"{x}\n" for x in lines))
    args = [
        "evaluate",
        "-c",
        str(cfg),
        "--src",
        str(tmp_path / "news.de"),
        "--ref",
        str(tmp_path / "news.en"),
        "--json",
    ]
    untrained_checkpoint(run / "best.pt")
    assert json.loads(CliRunner().invoke(app, args).stdout)["checkpoint"] == str(run / "best.pt")
    shutil.copy(run / "best.pt", run / "published.pt")
    assert json.loads(CliRunner().invoke(app, args).stdout)["checkpoint"] == str(run / "published.pt")


def test_a_model_of_the_other_direction_is_refused_on_the_configs_split(tmp_path, corpus_dir):
    """A de->en checkpoint scored on an en->de config's split would give a BLEU near 0 that says
    nothing: one line naming both directions and --reverse, exit 2, before any preprocessing."""
    from helpers import untrained_checkpoint, write_config
    from typer.testing import CliRunner

    from transformer_cli.cli import app

    cfg = write_config(tmp_path / "ende.yaml", tmp_path, corpus_dir, data={"src_lang": "en", "tgt_lang": "de"})
    model = untrained_checkpoint(tmp_path / "deen.pt")
    r = CliRunner().invoke(app, ["evaluate", "-c", str(cfg), "--checkpoint", str(model), "--split", "val"])
    assert (r.exit_code, r.stderr) == (
        2,
        f"tfm: error: {model} translates de->en, but the config's val split is en->de: add --reverse\n",
    )
    assert not (tmp_path / "data").exists()
