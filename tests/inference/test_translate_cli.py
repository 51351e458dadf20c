"""`tfm translate` and `tfm evaluate` on a small trained model, as a user runs them."""

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import sacrebleu
import torch
from helpers import run_tfm
from reference_search import greedy_search_uncached

from transformer_cli.inference.search import greedy_search, output_limits
from transformer_cli.inference.translate import TorchTranslator


def tr(trained, *args, **kw):
    return run_tfm("translate", "--config", str(trained["config"]), *args, **kw)


def test_translate_arguments(trained):
    r = tr(trained, "Ein mann sieht einen ball.", "Eine frau malt eine blume am strand.")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["A man sees a ball.", "A woman paints a flower on the beach."]


def test_translate_recases_lines_typed_without_casing_unless_told_not_to(trained):
    shouted = tr(trained, "EIN MANN SIEHT EINEN BALL.")
    assert shouted.returncode == 0 and shouted.stdout == "A man sees a ball.\n"
    as_typed = tr(trained, "--no-recase", "EIN MANN SIEHT EINEN BALL.")
    assert as_typed.returncode == 0 and as_typed.stdout.count("\n") == 1


def test_translate_stdin_keeps_order_and_empty_lines(trained):
    lines = ["Ein kind hält einen hut.", "", "Zwei hunde sieht ein buch im park.", "Ein junge malt."]
    r = tr(trained, input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 4 and out[1] == ""
    assert out[0] == "A child holds a hat." and out[2] == "Two dogs sees a book in the park."
    assert tr(trained, "-", input="Ein mann hält einen ball.\n").stdout == "A man holds a ball.\n"


def test_n_best_lines(trained):
    r = tr(trained, "--beam-size", "4", "--n-best", "3", "Ein mann sieht einen ball.", "Eine frau.")
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(rows) == 6 and [x[0] for x in rows] == ["0"] * 3 + ["1"] * 3
    scores = [float(x[1]) for x in rows[:3]]
    assert scores == sorted(scores, reverse=True) and rows[0][2] == "A man sees a ball."


def test_unknown_words_and_long_inputs(trained):
    r = tr(trained, "Xylophon Quatsch zzz 123 ÄÖÜ!", " ".join(["ein mann sieht einen ball"] * 60))
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2
    assert "line 2 has" in r.stderr and "truncated to 63" in r.stderr


def test_bad_inputs_are_one_line_errors(trained, tmp_path):
    bad = run_tfm_bytes(trained, b"Ein mann.\n\xff\xfe kaputt\n")
    assert bad.returncode == 2 and b"stdin line 2: not valid UTF-8" in bad.stderr
    missing = tr(trained, "--checkpoint", str(tmp_path / "nope.pt"), "hallo")
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("checkpoint not found: " + str(tmp_path / "nope.pt"))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint at all")
    r = tr(trained, "--checkpoint", str(junk), "hallo")
    assert r.returncode == 1 and "is damaged or not a checkpoint" in r.stderr and "Traceback" not in r.stderr
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    r = tr(trained, "--checkpoint", str(other), "hallo")
    assert r.returncode == 1 and "not a tfm checkpoint" in r.stderr
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps(Exploit()))
    r = tr(trained, "--checkpoint", str(evil), "hallo", cwd=tmp_path)
    assert r.returncode == 2 and "refusing to load" in r.stderr
    assert not (tmp_path / "pwned").exists()
    for line in (missing.stderr, r.stderr):
        assert len(line.strip().splitlines()) == 1


class Exploit:
    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def run_tfm_bytes(trained, data: bytes):
    return subprocess.run(
        [sys.executable, "-m", "transformer_cli", "translate", "-c", str(trained["config"])],
        input=data,
        capture_output=True,
    )


def test_attention_heatmap(trained, tmp_path):
    png = tmp_path / "attn.png"
    r = tr(trained, "--attention", str(png), "Ein mann sieht einen ball.")
    assert r.returncode == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert tr(trained, "--attention", str(png), "a", "b").returncode == 2


def test_evaluate_json_uses_sacrebleu(trained, corpus_dir):
    r = run_tfm("evaluate", "-c", str(trained["config"]), "--split", "test", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    for key in ("loss", "ppl", "bleu", "chrf", "signature", "beam_size", "n_sentences", "sentences_per_s"):
        assert key in report
    assert Path(report["hypotheses"]).parent == Path(report["checkpoint"]).parent / "hyps"
    hyps = open(report["hypotheses"], encoding="utf-8").read().splitlines()
    refs = gzip.open(corpus_dir / "test_2016_flickr.en.gz", "rt").read().splitlines()
    assert report["n_sentences"] == len(hyps) == len(refs) == 40
    assert report["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert report["chrf"] == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)
    assert report["bleu"] > 50 and "tok:13a" in report["signature"]


def test_evaluate_own_files_and_beam(trained, tmp_path):
    (tmp_path / "s.de").write_text("Ein mann sieht einen ball.\nEine frau hält ein buch.\n")
    (tmp_path / "s.en").write_text("A man sees a ball.\nA woman holds a book.\n")
    r = run_tfm(
        "evaluate",
        "-c",
        str(trained["config"]),
        "--src",
        str(tmp_path / "s.de"),
        "--ref",
        str(tmp_path / "s.en"),
        "--beam-size",
        "3",
    )
    assert r.returncode == 0, r.stderr
    assert "BLEU        100.00" in r.stdout and "beam 3" in r.stdout
    (tmp_path / "short.en").write_text("one line\n")
    r = run_tfm(
        "evaluate", "-c", str(trained["config"]), "--src", str(tmp_path / "s.de"), "--ref", str(tmp_path / "short.en")
    )
    assert r.returncode == 2 and "misaligned corpus" in r.stderr


def test_cached_greedy_equals_uncached_on_trained_model(trained):
    translator = TorchTranslator.from_checkpoint(trained["run"] / "best.pt", torch.device("cpu"))
    sources, _ = translator.encode_sources(
        ["Ein mann sieht einen ball.", "Zwei hunde tragen eine blume.", "Ein kind hält einen hut in der stadt."]
    )
    src = torch.nn.utils.rnn.pad_sequence(sources, batch_first=True, padding_value=1)
    limits = output_limits(torch.tensor([len(s) for s in sources]), 1.5, 10, 64)
    cached = greedy_search(translator.model, src, limits)
    naive = greedy_search_uncached(translator.model, src, limits)
    assert [h.tokens for h in cached] == [h.tokens for h in naive]
