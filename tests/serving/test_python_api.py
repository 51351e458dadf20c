"""The Python API: `tfm.load(...)` and `Translator.translate`, as a user calls them."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys

import pytest
import torch
from serving.serve_helpers import SENTENCES

import transformer_cli as tfm
from transformer_cli.checkpoint import Checkpoint, read_payload
from transformer_cli.config import DecodeConfig
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.errors import UsageError
from transformer_cli.inference.translate import TorchTranslator, model_from_checkpoint
from transformer_cli.model.transformer import Seq2SeqTransformer


def test_load_by_config_or_path_and_translate(trained, model, tmp_path):
    by_config = tfm.load(str(trained["config"]), device="cpu")
    assert by_config.path == trained["run"] / "published.pt" and by_config.sha256 == model.sha256
    # What a file is decides, not its name: a checkpoint called *.yaml, a config called *.pt.
    odd_checkpoint, odd_config = tmp_path / "model.yaml", tmp_path / "config.pt"
    shutil.copyfile(trained["run"] / "published.pt", odd_checkpoint)
    shutil.copyfile(trained["config"], odd_config)
    assert tfm.load(odd_checkpoint, device="cpu").path == odd_checkpoint
    assert tfm.load(odd_config, device="cpu").path == trained["run"] / "published.pt"
    assert model.translate(["Ein mann sieht einen ball.", ""]) == ["A man sees a ball.", ""]
    best = model.translate(["Ein mann sieht einen ball."], beam_size=4, n_best=3)
    assert len(best) == 1 and len(best[0]) == 3 and best[0][0] == "A man sees a ball."
    full, short = model.translate(SENTENCES), model.translate(SENTENCES, max_output_len=3)
    assert all(len(s) < len(f) and f.startswith(s) for s, f in zip(short, full))


def test_sources_typed_without_casing_are_recased_unless_switched_off(trained, model):
    """The toy corpus capitalizes only first words: its truecaser (stored in the checkpoint)
    gives "ein mann ..." and "EIN MANN ..." the training sources' spelling back."""
    assert "source_truecaser" in read_payload(trained["run"] / "published.pt")["tokenizer"]
    backend = model.backend
    typed, trained_like = "ein mann sieht einen ball.", "Ein mann sieht einen ball."
    ids = [backend.encode_sources([x])[0][0].tolist() for x in (typed, typed.upper(), trained_like)]
    assert ids[0] == ids[1] == ids[2]
    assert backend.encode_sources([typed], recase=False)[0][0].tolist() != ids[2]
    assert model.translate([typed, typed.upper()]) == ["A man sees a ball."] * 2
    encoded = model.encode([typed, ""])  # what the server budgets and decodes: recased, once
    assert encoded.tokens == len(ids[2]) - 1 and encoded.positions == [0] and encoded.ids[0].tolist() == ids[2]
    assert model.translate_encoded(encoded).translations == model.translate_n_best([typed, ""]).translations
    as_typed = model.attention(typed, model.options(recase=False)).source_tokens
    assert as_typed == backend.tokenizers.src.id_to_token(backend.encode_sources([typed], recase=False)[0][0].tolist())
    assert model.attention(typed).source_tokens == backend.tokenizers.src.id_to_token(ids[2])
    with pytest.raises(UsageError, match="recase must be true or false"):
        model.options(recase="no")


def test_metadata(trained, model):
    assert model.config_name == "toy" and len(model.sha256) == 64
    assert model.metrics["valid_loss"] > 0 and model.metrics["epoch"] >= 1
    info = model.info()
    assert info["path"].endswith("published.pt") and info["sha256"] == model.sha256 and info["loaded_at"]


def test_mistakes_are_clear_errors(trained, tmp_path, model):
    with pytest.raises(TypeError, match="list of lines"):
        model.translate("Ein mann.")
    with pytest.raises(UsageError, match="beam_size must be an integer >= 1"):
        model.translate(["Ein mann."], beam_size=0)
    with pytest.raises(UsageError, match="precision must be auto, fp32, bf16 or fp16 .got 'fp8'."):
        tfm.load(trained["run"] / "published.pt", precision="fp8")
    half = tfm.load(trained["run"] / "published.pt", device="cpu", precision="fp16")  # as training takes
    assert half.translate(["Ein mann sieht einen ball."]) == ["A man sees a ball."]
    empty = tmp_path / "none.yaml"
    empty.write_text(
        trained["config"].read_text().replace(str(trained["work"] / "checkpoints"), str(tmp_path / "nothing"))
    )
    with pytest.raises(UsageError, match="no model in .*published.pt or best.pt"):
        tfm.load(str(empty))
    with pytest.raises(UsageError, match="missing.pt: no such model file or export folder, and config file not found"):
        tfm.load(tmp_path / "missing.pt")


def test_decoding_leaves_the_callers_train_mode_alone(trained):
    """A model being trained is decoded in eval mode (no dropout) and handed back as it was."""
    trained_net, tokenizers = model_from_checkpoint(Checkpoint.read(trained["run"] / "best.pt"))
    net = Seq2SeqTransformer(
        dataclasses.replace(trained_net.config, dropout=0.5), trained_net.src_vocab_size, trained_net.tgt_vocab_size
    )
    net.load_state_dict(trained_net.state_dict())
    net.encoder.eval()  # a mixed state must survive too
    modes = {name: m.training for name, m in net.named_modules()}
    translator = TorchTranslator(net, tokenizers, torch.device("cpu"), DecodeConfig())
    first = translator.translate(SENTENCES).translations
    again = translator.translate(SENTENCES).translations
    translator.cross_attention(SENTENCES[0], first[0][0])
    translator.corpus_nll(
        EncodedSplit.from_lists(tokenizers.src.encode_batch(SENTENCES), tokenizers.tgt.encode_batch(SENTENCES))
    )
    assert {name: m.training for name, m in net.named_modules()} == modes
    assert [h[0].text for h in first] == [h[0].text for h in again]  # no dropout while decoding


def test_import_and_help_do_not_import_torch():
    code = "import sys, transformer_cli; from transformer_cli.cli import app; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
