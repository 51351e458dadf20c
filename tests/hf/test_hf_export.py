"""`tfm export --format hf`: the folder loads in transformers without a word about missing or
unexpected weights, computes tfm's logits and outputs, converts with CTranslate2's own
converter, and round-trips to tfm (and from transformers through tfm) with identical weights."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import run_tfm, sentence_pairs, untrained_checkpoint
from hf.marian_helpers import make_marian

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import DecodeConfig
from transformer_cli.errors import UsageError
from transformer_cli.hf.export import export_hf
from transformer_cli.hf.folder import read_folder
from transformer_cli.inference.translate import TorchTranslator, model_from_checkpoint

transformers = pytest.importorskip("transformers")

LINES = [
    "Ein Mann sieht einen Ball.",
    "Zwei Hunde tragen ein Buch im Park.",
    "Eine Frau malt.",
    "Ein Kind hält eine Blume am Strand.",
    "ein mädchen trägt einen hut in der stadt",
] * 8


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """The session's trained tiny model (interleaved sinusoids, joint SentencePiece, shared and
    tied embeddings) exported through the CLI."""
    out = tmp_path_factory.mktemp("hf") / "model"
    r = run_tfm("export", "-c", str(trained["config"]), "--format", "hf", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Hugging Face MarianMT" in r.stdout
    return {"folder": out, "checkpoint": trained["run"] / "published.pt"}


def test_transformers_loads_it_without_warnings_and_computes_tfms_logits(exported, caplog):
    from transformers import MarianMTModel, MarianTokenizer

    with caplog.at_level(logging.WARNING):
        hf = MarianMTModel.from_pretrained(exported["folder"]).eval()
        tokenizer = MarianTokenizer.from_pretrained(exported["folder"])
    said = " ".join(r.getMessage() for r in caplog.records).lower()
    for word in ("missing", "unexpected", "newly initialized", "not used", "not initialized"):
        assert word not in said, said
    model, tokenizers = model_from_checkpoint(Checkpoint.read(exported["checkpoint"]))
    model.eval()
    batch = tokenizer(LINES[:5], return_tensors="pt", padding=True)
    ours = tokenizers.src.encode_batch(LINES[:5])
    pieces = [tokenizer.convert_ids_to_tokens(row) for row in batch["input_ids"].tolist()]
    assert [[*tokenizers.src.id_to_token(ids), tokenizer.eos_token] for ids in ours] == [
        [p for p in row if p != tokenizer.pad_token] for row in pieces
    ]  # same pieces, other ids
    ids = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor([*i, tokenizers.src.ids.eos]) for i in ours],
        batch_first=True,
        padding_value=tokenizers.src.ids.pad,
    )
    start = torch.tensor([tokenizers.tgt.ids.sos, 40, 17, 8, 25])[None].repeat(5, 1)
    to_hf = {
        tfm: i
        for i, tfm in enumerate(
            [j for j in range(model.tgt_vocab_size) if j != tokenizers.tgt.ids.pad] + [tokenizers.tgt.ids.pad]
        )
    }
    remap = torch.tensor([to_hf[j] for j in range(model.tgt_vocab_size)])
    with torch.no_grad():
        got = model(ids, start)[..., remap.argsort()]  # tfm's logits in the exported id order
        expected = hf(**batch, decoder_input_ids=remap[start]).logits
    assert torch.allclose(got, expected, atol=1e-4), (got - expected).abs().max()


@pytest.mark.parametrize("beam", [1, 5])
def test_generate_gives_tfms_translations(exported, beam):
    from transformers import MarianMTModel, MarianTokenizer

    hf = MarianMTModel.from_pretrained(exported["folder"]).eval()
    tokenizer = MarianTokenizer.from_pretrained(exported["folder"])
    translator = TorchTranslator.from_checkpoint(
        exported["checkpoint"], torch.device("cpu"), DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=30)
    )
    ours = [hyps[0].text for hyps in translator.translate(LINES, translator.decode).translations]
    with torch.no_grad():  # generation_config.json holds tfm's settings: start, end, early stop
        out = hf.generate(**tokenizer(LINES, return_tensors="pt", padding=True), num_beams=beam, max_new_tokens=30)
    assert tokenizer.batch_decode(out, skip_special_tokens=True) == ours


def test_round_trips_keep_every_weight(exported, tmp_path):
    original = Checkpoint.read(exported["checkpoint"])
    back = read_folder(exported["folder"])  # tfm -> hf -> tfm
    assert back.weights.keys() == original.weights.keys()
    assert all(torch.equal(back.weights[k], original.weights[k]) for k in original.weights)
    assert back.model_config == original.model_config and back.tokenizer == original.tokenizer
    assert back.config["decode"] == original.config["decode"]

    from safetensors.torch import load_file
    from transformers import MarianMTModel  # hf -> tfm -> hf

    pairs = sentence_pairs(200)
    marian = make_marian(
        tmp_path / "m", [de for de, _ in pairs], [en for _, en in pairs], shared=False, tied=False, activation="relu"
    )
    export_hf(read_folder(marian), marian, tmp_path / "again")
    first, second = (load_file(str(f / "model.safetensors")) for f in (marian, tmp_path / "again"))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    for name in ("source.spm", "target.spm"):
        assert (marian / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    for name in ("vocab.json", "target_vocab.json"):
        assert json.loads((marian / name).read_text()) == json.loads((tmp_path / "again" / name).read_text())
    MarianMTModel.from_pretrained(tmp_path / "again")


def test_ctranslate2s_own_converter_converts_it(exported, tmp_path):
    import ctranslate2

    out = tmp_path / "ct2"
    converter = Path(sys.executable).parent / "ct2-transformers-converter"
    r = subprocess.run(
        [str(converter), "--model", str(exported["folder"]), "--output_dir", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(exported["folder"])
    translator = ctranslate2.Translator(str(out))
    tokens = [tokenizer.convert_ids_to_tokens(tokenizer(line)["input_ids"]) for line in LINES[:5]]
    results = translator.translate_batch(tokens, beam_size=1, max_decoding_length=30)
    assert all(r.hypotheses[0] for r in results)  # it decodes (from a zero start: see results.md)


def test_what_marian_cannot_express_is_refused_in_one_line(tmp_path):
    path = untrained_checkpoint(tmp_path / "pre.pt", norm="pre", positional="learned")
    with pytest.raises(UsageError) as e:
        export_hf(Checkpoint.read(path), path, tmp_path / "out")
    assert str(e.value) == (
        f"cannot export {path} to the Hugging Face format: model.norm='pre' "
        "(Marian is post-norm); model.positional='learned' (Marian computes sinusoids)"
    )
    assert not (tmp_path / "out").exists()
    r = run_tfm(
        "export", "--checkpoint", str(path), "--format", "hf", "-o", str(tmp_path / "out"), "--quantization", "int8"
    )
    assert r.returncode == 2 and "--quantization is for --format ctranslate2" in r.stderr


def test_every_reason_is_listed_lowercasing_of_word_vocabularies_too(tmp_path):
    from transformer_cli.tokenizers.pair import TokenizerPair
    from transformer_cli.tokenizers.word import WordTokenizer

    words = TokenizerPair(WordTokenizer.blank("de", lowercase=True), WordTokenizer.blank("en", lowercase=True))
    path = untrained_checkpoint(
        tmp_path / "seed-like.pt", words, norm="pre", positional="learned", share_embeddings=False, tie_output=False
    )
    with pytest.raises(UsageError) as e:
        export_hf(Checkpoint.read(path), path, tmp_path / "out")
    reasons = str(e.value).removeprefix(f"cannot export {path} to the Hugging Face format: ").split("; ")
    assert reasons == [
        "model.norm='pre' (Marian is post-norm)",
        "model.positional='learned' (Marian computes sinusoids)",
        *(
            reason.format(side)
            for side in ("source", "target")
            for reason in (
                "the {} tokenizer is a spacy word vocabulary (MarianTokenizer segments with SentencePiece)",
                "the {} tokenizer lowercases its input (MarianTokenizer does not)",
            )
        ),
    ]
    assert not (tmp_path / "out").exists()


def _generator(folder: Path) -> Callable[..., list[str]]:
    """generate(lines, beam, **limit): the folder's translations by transformers alone."""
    from transformers import MarianMTModel, MarianTokenizer

    hf, tokenizer = MarianMTModel.from_pretrained(folder).eval(), MarianTokenizer.from_pretrained(folder)

    def generate(lines: list[str], beam: int, **limit: int) -> list[str]:
        with torch.no_grad():
            out = hf.generate(**tokenizer(lines, return_tensors="pt", padding=True), num_beams=beam, **limit)
        return tokenizer.batch_decode(out, skip_special_tokens=True)

    return generate


@pytest.mark.parametrize("beam", [1, 4])
def test_generate_differs_only_where_tfms_length_rule_cuts_and_a_limit_per_sentence_closes_it(exported, beam):
    from transformers import MarianTokenizer

    lines = LINES[:5]
    decode = DecodeConfig(beam_size=beam, max_len_a=0.6, max_len_b=2)  # some outputs reach it
    translator = TorchTranslator.from_checkpoint(exported["checkpoint"], torch.device("cpu"), decode)
    ours = [hyps[0] for hyps in translator.translate(lines, decode).translations]
    sizes = [len(ids) for ids in MarianTokenizer.from_pretrained(exported["folder"])(lines)["input_ids"]]
    limits = [int(0.6 * n + 2) for n in sizes]  # tfm's rule, n counting </s> as tfm's does
    cut = [len(hyp.tokens) + 1 == limit for hyp, limit in zip(ours, limits)]
    assert any(cut) and not all(cut), limits

    generate = _generator(exported["folder"])
    one_by_one = [
        generate([line], beam, max_new_tokens=limit)[0] for line, limit in zip(lines, limits)
    ]  # as docs/huggingface.md says to reproduce tfm
    assert one_by_one == [hyp.text for hyp in ours]
    batched = generate(lines, beam)  # generation_config.json's limit only
    if beam == 1:  # greedy tokens do not depend on the limit: only outputs that reached it differ
        same = [b == hyp.text for b, hyp in zip(batched, ours)]
        assert all(s for s, c in zip(same, cut) if not c) and not all(same)


def test_generation_configs_max_length_is_tfms_cap(tmp_path):
    path = untrained_checkpoint(tmp_path / "random.pt")  # an untrained model runs on to the cap
    export_hf(Checkpoint.read(path), path, tmp_path / "hf")
    decode = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=1000)  # capped at model.max_len (64)
    translator = TorchTranslator.from_checkpoint(path, torch.device("cpu"), decode)
    ours = [hyps[0] for hyps in translator.translate(LINES[:5], decode).translations]
    assert max(len(hyp.tokens) for hyp in ours) == 63  # + </s>: 64
    assert _generator(tmp_path / "hf")(LINES[:5], 1) == [hyp.text for hyp in ours]
